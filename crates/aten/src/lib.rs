//! ATen's operator descriptions for the torch face: the schema grammar ([`schema`]) and the
//! registry read from upstream's `native_functions.yaml` ([`registry`]). Pure Rust, no Python,
//! so the parsers are unit-tested and fuzzed on their own.

pub mod registry;
pub mod schema;

pub use registry::{NativeFunction, Registry, RegistryError, UPSTREAM_EXTRA_SCHEMAS};
pub use schema::{parse_schema, AliasInfo, Argument, BaseType, FunctionSchema, SchemaError, Type};
