"""The pieces of ``@zyntax.kernel``'s translator (:mod:`zyntax.frontend.translator`):
operands and type rules, the core (locations, errors, SSA variables), expressions
and calls, and the ``zyntax.lang`` primitives, one class on top of the other."""
