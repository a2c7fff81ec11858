//! Which instructions and types each target arch and PTX version allow (being written).
