//! The operator registry, read from upstream's `native_functions.yaml`.
//!
//! The file ships inside the torch wheel (`torchgen/packaged/ATen/native/native_functions.yaml`)
//! and is the one source of operator names, overloads, schemas, method/function variants, Python
//! submodules (`nn`, `linalg`, `special`, `fft`) and the dispatch keys upstream has kernels for.
//! We read only the keys we use, from the file's regular layout (a list of mappings, two-space
//! indented keys, `dispatch:` entries four spaces in), instead of a general YAML parser.

use crate::schema::{parse_schema, FunctionSchema, SchemaError};
use std::collections::HashMap;

/// One `- func:` entry.
#[derive(Debug, Clone)]
pub struct NativeFunction {
    pub schema: FunctionSchema,
    /// `variants:` contains `function` (default when absent).
    pub function: bool,
    /// `variants:` contains `method`.
    pub method: bool,
    /// `python_module:` (`nn`, `linalg`, `special`, `fft`, `sparse`, `nested`), if any.
    pub python_module: Option<String>,
    /// Dispatch keys with an upstream kernel, from `dispatch:` (e.g. `CPU`, `CUDA`,
    /// `CompositeExplicitAutograd`); empty when the entry has none.
    pub dispatch_keys: Vec<String>,
    /// `structured_delegate:`: the out= overload whose kernel computes this one.
    pub structured_delegate: Option<String>,
    /// `tags:` (e.g. `core`, `pointwise`, `inplace_view`, `nondeterministic_seeded`).
    pub tags: Vec<String>,
    /// `autogen:` overloads upstream generates from this entry (`add.out`); their schemas are
    /// not in the file.
    pub autogen: Vec<String>,
    /// Registered by upstream's C++ outside the yaml ([`UPSTREAM_EXTRA_SCHEMAS`]): no Python
    /// binding, no dispatch information.
    pub extra: bool,
    /// In upstream's dispatcher (every yaml entry is; TorchScript-only extras are not).
    pub in_dispatcher: bool,
}

/// The schemas upstream registers from C++ outside native_functions.yaml (TorchScript's
/// `aten::` extras, `prim::`, `profiler::`, `quantized::`, ...), one a line; generated from
/// upstream's dispatcher by `scripts/gen-upstream-extra-schemas.py`.
pub const UPSTREAM_EXTRA_SCHEMAS: &str = include_str!("../data/upstream_extra_schemas.txt");

impl NativeFunction {
    /// Upstream decomposes entries without `dispatch:` and without a structured delegate in
    /// C++ (CompositeImplicitAutograd); the face decomposes them too.
    pub fn is_composite_implicit(&self) -> bool {
        !self.extra && (self.dispatch_keys.is_empty() && self.structured_delegate.is_none())
            || self
                .dispatch_keys
                .iter()
                .any(|k| k == "CompositeImplicitAutograd")
    }

    /// Does upstream have a kernel for `key` (`CPU`, `Meta`, `CompositeExplicitAutograd`...)?
    pub fn has_kernel_for(&self, key: &str) -> bool {
        if self.dispatch_keys.iter().any(|k| k == key) {
            return true;
        }
        match key {
            "CompositeImplicitAutograd" => self.is_composite_implicit(),
            // Structured kernels register CPU/CUDA/Meta through their delegate.
            "CPU" | "Meta" => self.structured_delegate.is_some(),
            _ => false,
        }
    }
}

/// A registry read error: the line and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "native_functions.yaml line {}: {}",
            self.line, self.reason
        )
    }
}

impl std::error::Error for RegistryError {}

impl From<(usize, SchemaError)> for RegistryError {
    fn from((line, e): (usize, SchemaError)) -> Self {
        RegistryError {
            line,
            reason: e.to_string(),
        }
    }
}

/// All entries plus indexes by full name (`aten::add.Tensor`) and by base name (`add`).
#[derive(Debug, Default)]
pub struct Registry {
    pub functions: Vec<NativeFunction>,
    by_full_name: HashMap<String, usize>,
    by_base_name: HashMap<String, Vec<usize>>,
}

/// Strips a trailing `# comment` (outside quotes) and surrounding whitespace.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') => return line[..i].trim_end(),
            _ => {}
        }
    }
    line.trim_end()
}

fn split_list(value: &str) -> Vec<String> {
    value
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Registry {
    /// Reads the yaml text. Unknown keys are ignored; a malformed `func:` is an error.
    pub fn parse(yaml: &str) -> Result<Registry, RegistryError> {
        let mut reg = Registry::default();
        let mut current: Option<NativeFunction> = None;
        let mut in_dispatch = false;
        for (index, raw) in yaml.lines().enumerate() {
            let line_no = index + 1;
            let line = strip_comment(raw);
            if line.trim().is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("- func:") {
                if let Some(f) = current.take() {
                    reg.push(f);
                }
                let schema = parse_schema(rest.trim(), "aten").map_err(|e| (line_no, e))?;
                current = Some(NativeFunction {
                    schema,
                    function: true,
                    method: false,
                    python_module: None,
                    dispatch_keys: Vec::new(),
                    structured_delegate: None,
                    tags: Vec::new(),
                    autogen: Vec::new(),
                    extra: false,
                    in_dispatcher: true,
                });
                in_dispatch = false;
                continue;
            }
            let Some(f) = current.as_mut() else {
                if line.starts_with('-') {
                    return Err(RegistryError {
                        line: line_no,
                        reason: "an entry that does not start with 'func:'".into(),
                    });
                }
                continue;
            };
            if let Some(entry) = line.strip_prefix("    ") {
                if in_dispatch {
                    if let Some((keys, _kernel)) = entry.split_once(':') {
                        f.dispatch_keys.extend(split_list(keys));
                    }
                }
                continue;
            }
            let Some(entry) = line.strip_prefix("  ") else {
                return Err(RegistryError {
                    line: line_no,
                    reason: format!("unexpected indentation: '{line}'"),
                });
            };
            in_dispatch = false;
            let (key, value) = entry.split_once(':').unwrap_or((entry, ""));
            let value = value.trim();
            match key.trim() {
                "variants" => {
                    let v = split_list(value);
                    f.function = v.iter().any(|s| s == "function");
                    f.method = v.iter().any(|s| s == "method");
                }
                "python_module" => f.python_module = Some(value.to_string()),
                "dispatch" => in_dispatch = true,
                "structured_delegate" => f.structured_delegate = Some(value.to_string()),
                "tags" => f.tags = split_list(value),
                "autogen" => f.autogen = split_list(value),
                _ => {}
            }
        }
        if let Some(f) = current.take() {
            reg.push(f);
        }
        reg.add_autogen_out_variants();
        Ok(reg)
    }

    /// torchgen's `autogen:` out= variants (`empty_like.out`): the source's arguments plus
    /// keyword-only `out` tensors that the overload writes and returns. Only out= forms are
    /// derived; other autogen kinds (functional forms of in-place ops) are left absent.
    fn add_autogen_out_variants(&mut self) {
        let mut derived = Vec::new();
        for f in &self.functions {
            for name in &f.autogen {
                let (base, overload) = name.split_once('.').unwrap_or((name, ""));
                if self.by_full_name.contains_key(&format!("aten::{name}")) {
                    continue;
                }
                if !overload.ends_with("out") {
                    // The functional form of an in-place op (`_resize_output_` -> `_resize_output`):
                    // same arguments, nothing written, fresh results.
                    let mut s = f.schema.clone();
                    s.name = format!("aten::{base}");
                    s.overload = overload.to_string();
                    for a in s.arguments.iter_mut().chain(s.returns.iter_mut()) {
                        a.alias = None;
                    }
                    let mut g = f.clone();
                    g.schema = s;
                    g.autogen = Vec::new();
                    // torchgen binds no Python function or method for autogen overloads.
                    g.function = false;
                    g.method = false;
                    g.tags.push("generated".into());
                    derived.push(g);
                    continue;
                }
                let mut s = f.schema.clone();
                s.name = format!("aten::{base}");
                s.overload = overload.to_string();
                for a in &mut s.arguments {
                    if a.is_write() {
                        // The out= form leaves the source's mutated input alone.
                        a.alias = None;
                    }
                }
                let tensor_returns: Vec<_> = s
                    .returns
                    .iter()
                    .filter(|r| r.ty.base == crate::schema::BaseType::Tensor)
                    .cloned()
                    .collect();
                let n = tensor_returns.len();
                let mut returns = Vec::new();
                for (i, r) in tensor_returns.into_iter().enumerate() {
                    let set = ((b'a' + i as u8) as char).to_string();
                    let alias = Some(crate::schema::AliasInfo {
                        before: vec![set],
                        after: Vec::new(),
                        is_write: true,
                        after_list: false,
                    });
                    let out_name = if n == 1 {
                        "out".to_string()
                    } else {
                        format!("out{i}")
                    };
                    s.arguments.push(crate::schema::Argument {
                        name: out_name,
                        ty: r.ty.clone(),
                        alias: alias.clone(),
                        default: None,
                        kwarg_only: true,
                        is_out: true,
                    });
                    if r.ty.list.is_none() {
                        returns.push(crate::schema::Argument { alias, ..r });
                    }
                }
                s.returns = returns;
                let mut g = f.clone();
                g.schema = s;
                g.function = false;
                g.method = false;
                g.autogen = Vec::new();
                g.tags.push("generated".into());
                derived.push(g);
            }
        }
        for g in derived {
            self.push(g);
        }
    }

    /// Adds schemas registered outside the yaml (one per line after `D ` for dispatcher
    /// operators or `J ` for TorchScript-only ones; `#` comments), skipping any the registry
    /// already has.
    pub fn add_extra_schemas(&mut self, text: &str) -> Result<(), RegistryError> {
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (in_dispatcher, line) = match line.split_once(' ') {
                Some(("D", rest)) => (true, rest),
                Some(("J", rest)) => (false, rest),
                _ => {
                    return Err(RegistryError {
                        line: index + 1,
                        reason: format!("expected 'D ' or 'J ' before the schema: '{line}'"),
                    })
                }
            };
            let schema = parse_schema(line, "aten").map_err(|e| (index + 1, e))?;
            if self.by_full_name.contains_key(&schema.full_name()) {
                continue;
            }
            self.push(NativeFunction {
                schema,
                function: false,
                method: false,
                python_module: None,
                dispatch_keys: Vec::new(),
                structured_delegate: None,
                tags: Vec::new(),
                autogen: Vec::new(),
                extra: true,
                in_dispatcher,
            });
        }
        Ok(())
    }

    /// All overloads of a qualified name (`aten::add`, `prim::device`), in registration order.
    pub fn overloads_of<'a>(
        &'a self,
        qualified: &'a str,
    ) -> impl Iterator<Item = &'a NativeFunction> + 'a {
        let base = qualified.rsplit_once("::").map_or(qualified, |(_, b)| b);
        self.overloads(base)
            .filter(move |f| f.schema.name == qualified)
    }

    fn push(&mut self, f: NativeFunction) {
        let i = self.functions.len();
        self.by_full_name.insert(f.schema.full_name(), i);
        self.by_base_name
            .entry(f.schema.base_name().to_string())
            .or_default()
            .push(i);
        self.functions.push(f);
    }

    /// The entry for `aten::add.Tensor` (or `aten::relu` for a default overload).
    pub fn get(&self, full_name: &str) -> Option<&NativeFunction> {
        self.by_full_name
            .get(full_name)
            .map(|&i| &self.functions[i])
    }

    /// All overloads of a base name (`add`), in file order.
    pub fn overloads(&self, base_name: &str) -> impl Iterator<Item = &NativeFunction> {
        self.by_base_name
            .get(base_name)
            .into_iter()
            .flatten()
            .map(|&i| &self.functions[i])
    }

    /// Base names in file order of first appearance.
    pub fn base_names(&self) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        self.functions
            .iter()
            .map(|f| f.schema.base_name())
            .filter(|n| seen.insert(*n))
            .collect()
    }
}
