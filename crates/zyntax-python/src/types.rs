//! `zyntax.hir.Type` and conversions from Python objects to HIR types and enums.

use crate::checked::{Checked, Text};
use crate::errors::{ArgumentError, BuildError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use zyntax_hir::{
    AddrSpace, FragKind, FragType, Layout, MmaShape, ScalarType, Type, MAX_TYPE_DEPTH,
};

/// An HIR type: scalar, vector, array, pointer or MMA fragment. Immutable and
/// hashable; `str()` gives the `.zir` spelling.
#[pyclass(frozen, name = "Type", module = "zyntax.hir")]
#[derive(Clone)]
pub struct PyHirType(pub Type);

#[pymethods]
impl PyHirType {
    /// Parses a type from its `.zir` spelling, e.g. `"ptr<global, f32>"`.
    #[staticmethod]
    fn parse(text: Text) -> PyResult<Self> {
        parse_type_text(&text).map(PyHirType)
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }
    fn __repr__(&self) -> String {
        format!("Type('{}')", self.0)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyHirType>().is_ok_and(|o| o.get().0 == self.0)
    }
    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.0.hash(&mut h);
        h.finish()
    }
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (String,))> {
        let parse = py.get_type::<PyHirType>().getattr("parse")?.unbind();
        Ok((parse, (self.0.to_string(),)))
    }

    /// One of `"scalar"`, `"vector"`, `"array"`, `"ptr"`, `"frag"`, `"tensormap"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.0 {
            Type::Scalar(_) => "scalar",
            Type::Vector(..) => "vector",
            Type::Array(..) => "array",
            Type::Ptr(..) => "ptr",
            Type::Frag(_) => "frag",
            Type::TensorMap => "tensormap",
        }
    }
    #[getter]
    fn is_int(&self) -> bool {
        self.0.is_int()
    }
    #[getter]
    fn is_signed(&self) -> bool {
        self.0.as_scalar().is_some_and(ScalarType::is_signed)
    }
    #[getter]
    fn is_float(&self) -> bool {
        self.0.is_float()
    }
    #[getter]
    fn is_bool(&self) -> bool {
        self.0.is_bool()
    }
    #[getter]
    fn is_ptr(&self) -> bool {
        self.0.is_ptr()
    }
    /// Bit width of a scalar type, else `None`.
    #[getter]
    fn bits(&self) -> Option<u32> {
        self.0.as_scalar().map(ScalarType::bits)
    }
    /// Size in memory in bytes (`None` for fragments).
    #[getter]
    fn size_bytes(&self) -> Option<u64> {
        self.0.size_bytes()
    }
    /// Element type of a vector or array, pointee of a pointer, element of a fragment.
    #[getter]
    fn elem(&self) -> Option<PyHirType> {
        match &self.0 {
            Type::Vector(s, _) => Some(PyHirType(Type::Scalar(*s))),
            Type::Array(e, _) => Some(PyHirType((**e).clone())),
            Type::Ptr(_, t) => Some(PyHirType((**t).clone())),
            Type::Frag(f) => Some(PyHirType(Type::Scalar(f.elem))),
            Type::Scalar(_) | Type::TensorMap => None,
        }
    }
    /// Lane count of a vector or length of an array.
    #[getter]
    fn length(&self) -> Option<u64> {
        match &self.0 {
            Type::Vector(_, n) => Some(u64::from(*n)),
            Type::Array(_, n) => Some(*n),
            _ => None,
        }
    }
    /// Address space name of a pointer type.
    #[getter]
    fn addr_space(&self) -> Option<&'static str> {
        self.0.addr_space().map(AddrSpace::name)
    }
}

impl PyHirType {
    pub fn scalar(s: ScalarType) -> Self {
        PyHirType(Type::Scalar(s))
    }
}

fn numpy_scalar_name(name: &str) -> Option<ScalarType> {
    Some(match name {
        "bool" | "bool_" => ScalarType::Bool,
        "int8" => ScalarType::I8,
        "int16" => ScalarType::I16,
        "int32" => ScalarType::I32,
        "int64" => ScalarType::I64,
        "uint8" => ScalarType::U8,
        "uint16" => ScalarType::U16,
        "uint32" => ScalarType::U32,
        "uint64" => ScalarType::U64,
        "float16" => ScalarType::F16,
        "float32" => ScalarType::F32,
        "float64" => ScalarType::F64,
        "bfloat16" => ScalarType::BF16,
        _ => return None,
    })
}

/// Accepts a `Type`, a type's `.zir` spelling (`"f32"`, `"ptr<global, u32>"`), or a
/// numpy dtype / scalar type (`np.float32`).
pub fn to_type(obj: &Bound<'_, PyAny>) -> PyResult<Type> {
    if let Ok(t) = obj.cast::<PyHirType>() {
        return Ok(t.get().0.clone());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return parse_type_text(&s.to_cow()?);
    }
    // numpy dtypes (instances of numpy.dtypes.*) and scalar classes (np.float32),
    // recognised by module so that numpy is imported only when one is passed.
    let from_numpy = |o: &Bound<'_, PyAny>| {
        o.getattr("__module__")
            .and_then(|m| m.extract::<String>())
            .is_ok_and(|m| m == "numpy" || m.starts_with("numpy."))
    };
    if from_numpy(obj) || from_numpy(obj.get_type().as_any()) {
        let np = obj.py().import("numpy")?;
        if let Ok(dt) = np.getattr("dtype")?.call1((obj,)) {
            let name: String = dt.getattr("name")?.extract()?;
            if let Some(s) = numpy_scalar_name(&name) {
                return Ok(Type::Scalar(s));
            }
            return Err(BuildError::new_err(format!(
                "numpy dtype {name} has no zyntax equivalent"
            )));
        }
    }
    Err(ArgumentError::new_err(format!(
        "expected a zyntax.hir.Type, a type name such as 'f32', or a numpy dtype; got {}",
        type_name(obj)
    )))
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "<unknown>".into())
}

pub fn to_types(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Type>> {
    if obj.cast::<PyString>().is_ok() || obj.cast::<PyHirType>().is_ok() {
        return Err(ArgumentError::new_err(
            "expected a sequence of types (e.g. [f32, u32]), got a single type",
        ));
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        out.push(to_type(&item?)?);
    }
    Ok(out)
}

/// Looks a name up in one of the HIR's named enums, listing the valid names on failure.
pub fn enum_name<T: Copy>(
    what: &str,
    name: &str,
    all: &[T],
    from_name: impl Fn(&str) -> Option<T>,
    to_name: impl Fn(T) -> &'static str,
) -> PyResult<T> {
    from_name(name).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|v| to_name(*v)).collect();
        BuildError::new_err(format!(
            "unknown {what} '{name}' (expected one of: {})",
            names.join(", ")
        ))
    })
}

/// Parses the `.zir` spelling of a type (see `Type`'s `Display`).
pub fn parse_type_text(text: &str) -> PyResult<Type> {
    let mut p = TypeParser {
        s: text.as_bytes(),
        pos: 0,
        text,
    };
    let t = p.ty(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.error("unexpected text after the type"));
    }
    Ok(t)
}

struct TypeParser<'a> {
    s: &'a [u8],
    pos: usize,
    text: &'a str,
}

impl TypeParser<'_> {
    fn error(&self, msg: &str) -> PyErr {
        BuildError::new_err(format!(
            "invalid type '{}': {msg} at column {}",
            self.text,
            self.pos + 1
        ))
    }
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: u8) -> PyResult<()> {
        self.ws();
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected '{}'", c as char)))
        }
    }
    fn word(&mut self) -> PyResult<&str> {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric() || self.s[self.pos] == b'_')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("expected a name"));
        }
        Ok(&self.text[start..self.pos])
    }
    fn number(&mut self) -> PyResult<u64> {
        let w = self.word()?.to_string();
        w.parse::<u64>()
            .map_err(|_| self.error(&format!("expected a number, got '{w}'")))
    }
    fn scalar(&mut self) -> PyResult<ScalarType> {
        let w = self.word()?.to_string();
        ScalarType::from_name(&w).ok_or_else(|| self.error(&format!("unknown scalar type '{w}'")))
    }
    /// `depth`: constructors around this type so far (see `MAX_TYPE_DEPTH`).
    fn ty(&mut self, depth: u32) -> PyResult<Type> {
        self.ws();
        if depth > MAX_TYPE_DEPTH {
            return Err(self.error(&format!(
                "type nested more than {MAX_TYPE_DEPTH} levels deep"
            )));
        }
        if self.s.get(self.pos) == Some(&b'[') {
            self.pos += 1;
            let elem = self.ty(depth + 1)?;
            self.eat(b';')?;
            let n = self.number()?;
            self.eat(b']')?;
            return Ok(Type::array(elem, n));
        }
        let w = self.word()?.to_string();
        match w.as_str() {
            "tensormap" => Ok(Type::TensorMap),
            "vec" => {
                if depth + 1 > MAX_TYPE_DEPTH {
                    return Err(self.error(&format!(
                        "type nested more than {MAX_TYPE_DEPTH} levels deep"
                    )));
                }
                self.eat(b'<')?;
                let s = self.scalar()?;
                self.eat(b',')?;
                let n = self.number()?;
                self.eat(b'>')?;
                let n = u32::try_from(n).map_err(|_| self.error("vector too long"))?;
                Ok(Type::Vector(s, n))
            }
            "ptr" => {
                self.eat(b'<')?;
                let sp = self.word()?.to_string();
                let space = AddrSpace::from_name(&sp)
                    .ok_or_else(|| self.error(&format!("unknown address space '{sp}'")))?;
                self.eat(b',')?;
                let t = self.ty(depth + 1)?;
                self.eat(b'>')?;
                Ok(Type::ptr(space, t))
            }
            "frag" => {
                self.eat(b'<')?;
                let k = self.word()?.to_string();
                let kind = FragKind::from_name(&k)
                    .ok_or_else(|| self.error(&format!("unknown fragment kind '{k}'")))?;
                self.eat(b',')?;
                let sh = self.word()?.to_string();
                let shape = MmaShape::from_name(&sh)
                    .ok_or_else(|| self.error(&format!("unknown MMA shape '{sh}'")))?;
                self.eat(b',')?;
                let elem = self.scalar()?;
                self.ws();
                let mut layout = None;
                if self.s.get(self.pos) == Some(&b',') {
                    self.pos += 1;
                    let l = self.word()?.to_string();
                    layout = Some(
                        Layout::from_name(&l)
                            .ok_or_else(|| self.error(&format!("unknown layout '{l}'")))?,
                    );
                }
                self.eat(b'>')?;
                Ok(Type::Frag(FragType {
                    kind,
                    shape,
                    elem,
                    layout,
                }))
            }
            other => ScalarType::from_name(other)
                .map(Type::Scalar)
                .ok_or_else(|| self.error(&format!("unknown type '{other}'"))),
        }
    }
}

// ---------------------------------------------------------------- constructors

/// Pointer to `pointee` in an address space (`"generic"`, `"global"`, `"shared"`,
/// `"constant"`, `"local"`).
#[pyfunction]
pub fn ptr(space: Text, pointee: &Bound<'_, PyAny>) -> PyResult<PyHirType> {
    let space = enum_name(
        "address space",
        &space,
        &AddrSpace::ALL,
        AddrSpace::from_name,
        AddrSpace::name,
    )?;
    nested(Type::ptr(space, to_type(pointee)?))
}

/// A constructed type, unless it nests deeper than `MAX_TYPE_DEPTH`.
fn nested(t: Type) -> PyResult<PyHirType> {
    t.check_depth().map_err(BuildError::new_err)?;
    Ok(PyHirType(t))
}

/// A vector of `lanes` scalars (2, 4 or 8 lanes).
#[pyfunction]
pub fn vec(elem: &Bound<'_, PyAny>, lanes: Checked<u32>) -> PyResult<PyHirType> {
    match to_type(elem)? {
        Type::Scalar(s) => Ok(PyHirType(Type::Vector(s, lanes.0))),
        other => Err(BuildError::new_err(format!(
            "vector elements must be scalars, got {other}"
        ))),
    }
}

/// A fixed-size array (as a pointee or shared allocation element).
#[pyfunction]
pub fn array(elem: &Bound<'_, PyAny>, length: Checked<u64>) -> PyResult<PyHirType> {
    nested(Type::array(to_type(elem)?, length.0))
}

/// An MMA fragment type: `kind` is `"a"`, `"b"` or `"acc"`; `shape` e.g. `"m16n16k16"`;
/// A/B fragments take a `layout` (`"row"`/`"col"`), accumulators none.
#[pyfunction]
#[pyo3(signature = (kind, shape, elem, layout=None))]
pub fn frag(
    kind: Text,
    shape: Text,
    elem: &Bound<'_, PyAny>,
    layout: Option<Text>,
) -> PyResult<PyHirType> {
    let kind = FragKind::from_name(&kind).ok_or_else(|| {
        BuildError::new_err(format!(
            "unknown fragment kind '{kind}' (expected one of: a, b, acc)"
        ))
    })?;
    let shape = enum_name(
        "MMA shape",
        &shape,
        &MmaShape::ALL,
        MmaShape::from_name,
        MmaShape::name,
    )?;
    let Type::Scalar(elem) = to_type(elem)? else {
        return Err(BuildError::new_err("fragment elements must be scalars"));
    };
    let layout = layout.as_deref().map(parse_layout).transpose()?;
    match (kind, layout) {
        (FragKind::Acc, Some(_)) => Err(BuildError::new_err(
            "accumulator fragments take no layout (it is given at load/store time)",
        )),
        (FragKind::A | FragKind::B, None) => Err(BuildError::new_err(
            "A and B fragments need a layout ('row' or 'col')",
        )),
        _ => Ok(PyHirType(Type::Frag(FragType {
            kind,
            shape,
            elem,
            layout,
        }))),
    }
}

pub fn parse_layout(s: &str) -> PyResult<Layout> {
    Layout::from_name(s).ok_or_else(|| {
        BuildError::new_err(format!("unknown layout '{s}' (expected one of: row, col)"))
    })
}

/// Registers the scalar type constants (`f32`, `u32`, ...) on the module.
pub fn add_scalars(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for s in ScalarType::ALL {
        // `bool_` (as numpy spells it) so that the builtin `bool` stays usable.
        let name = if s == ScalarType::Bool {
            "bool_"
        } else {
            s.name()
        };
        m.add(name, PyHirType::scalar(s))?;
    }
    // The TMA tensor-map parameter type (issue 13).
    m.add("tensormap", PyHirType(Type::TensorMap))?;
    Ok(())
}
