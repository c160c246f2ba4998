//! ATen function schemas: `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
//!
//! The grammar is upstream's (torchgen `FunctionSchema.parse`, c10 `parseSchema`): a qualified
//! name with an optional overload, a parenthesised argument list where `*` starts the keyword-only
//! arguments, and a return list. Types carry optional `?`, list `[]` / `[N]` suffixes and alias
//! annotations `(a)`, `(a!)`, `(a -> *)`. Schemas come from upstream's yaml and from users
//! (`torch.library.define`), so every malformed input is an error naming the schema and the spot.

use std::fmt;

/// A parse failure: the schema text and what was wrong where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    pub schema: String,
    pub reason: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid schema '{}': {}", self.schema, self.reason)
    }
}

impl std::error::Error for SchemaError {}

/// The base kinds of ATen argument types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BaseType {
    Tensor,
    Scalar,
    Int,
    SymInt,
    Float,
    Bool,
    Str,
    ScalarType,
    Layout,
    Device,
    DeviceIndex,
    MemoryFormat,
    Generator,
    Dimname,
    Storage,
    Stream,
    QScheme,
    ConstQuantizerPtr,
    Any,
    /// Anything else (custom classes, `__torch__...`); kept by name.
    Other,
}

impl BaseType {
    fn parse(name: &str) -> BaseType {
        match name {
            "Tensor" => BaseType::Tensor,
            "Scalar" | "number" => BaseType::Scalar,
            "int" => BaseType::Int,
            "SymInt" => BaseType::SymInt,
            "float" => BaseType::Float,
            "bool" => BaseType::Bool,
            "str" => BaseType::Str,
            "ScalarType" => BaseType::ScalarType,
            "Layout" => BaseType::Layout,
            "Device" => BaseType::Device,
            "DeviceIndex" => BaseType::DeviceIndex,
            "MemoryFormat" => BaseType::MemoryFormat,
            "Generator" => BaseType::Generator,
            "Dimname" => BaseType::Dimname,
            "Storage" => BaseType::Storage,
            "Stream" => BaseType::Stream,
            "QScheme" => BaseType::QScheme,
            "ConstQuantizerPtr" => BaseType::ConstQuantizerPtr,
            "Any" => BaseType::Any,
            _ => BaseType::Other,
        }
    }
}

/// An argument or return type: base, optional-ness, list-ness (with a fixed size when given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Type {
    pub base: BaseType,
    /// The base type's spelling as written (`Tensor`, `SymInt`, `__torch__.torch.classes.x`).
    pub base_name: String,
    /// `Tensor?[]`: the elements are optional.
    pub elem_optional: bool,
    /// `None` for a non-list, `Some(None)` for `T[]`, `Some(Some(n))` for `T[n]`.
    pub list: Option<Option<usize>>,
    /// `T?` or `T[]?`.
    pub optional: bool,
}

impl Type {
    pub fn is_tensor_like(&self) -> bool {
        self.base == BaseType::Tensor
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base_name)?;
        if self.elem_optional {
            f.write_str("?")?;
        }
        match self.list {
            Some(Some(n)) => write!(f, "[{n}]")?,
            Some(None) => f.write_str("[]")?,
            None => {}
        }
        if self.optional {
            f.write_str("?")?;
        }
        Ok(())
    }
}

/// An alias annotation `(a)`, `(a!)`, `(a -> *)`, `(a|b)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasInfo {
    pub before: Vec<String>,
    pub after: Vec<String>,
    pub is_write: bool,
    /// Written after the list suffix (`Tensor[](a!)`) rather than after the base (`Tensor(a)[]`).
    pub after_list: bool,
}

impl fmt::Display for AliasInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        f.write_str(&self.before.join("|"))?;
        if self.is_write {
            f.write_str("!")?;
        }
        if !self.after.is_empty() {
            write!(f, " -> {}", self.after.join("|"))?;
        }
        f.write_str(")")
    }
}

/// One argument (or a return when `name` may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    pub ty: Type,
    pub alias: Option<AliasInfo>,
    /// The default as written in the schema (`1`, `None`, `[0,1]`, `"mean"`, `False`).
    pub default: Option<String>,
    pub kwarg_only: bool,
    /// A keyword-only argument with a write alias: an `out=` argument.
    pub is_out: bool,
}

impl Argument {
    pub fn is_write(&self) -> bool {
        self.alias.as_ref().is_some_and(|a| a.is_write)
    }
}

impl fmt::Display for Argument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The alias sits where it was written: after the base type, or after the list suffix.
        f.write_str(&self.ty.base_name)?;
        let after_list = self.alias.as_ref().is_some_and(|a| a.after_list);
        if let Some(a) = self.alias.as_ref().filter(|_| !after_list) {
            write!(f, "{a}")?;
        }
        let full = self.ty.to_string();
        let suffixes = &full[self.ty.base_name.len()..];
        match (
            self.alias.as_ref().filter(|_| after_list),
            suffixes.strip_suffix('?'),
        ) {
            (Some(a), Some(list)) if self.ty.optional => write!(f, "{list}{a}?")?,
            (Some(a), _) => write!(f, "{suffixes}{a}")?,
            (None, _) => f.write_str(suffixes)?,
        }
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        if let Some(d) = &self.default {
            write!(f, "={d}")?;
        }
        Ok(())
    }
}

/// A parsed schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSchema {
    /// Qualified name without overload, e.g. `aten::add` (the namespace is `aten` when the text
    /// gave none, as native_functions.yaml does).
    pub name: String,
    /// `Tensor`, `out`, or empty for the default overload.
    pub overload: String,
    pub arguments: Vec<Argument>,
    pub returns: Vec<Argument>,
    /// `...` at the end of the arguments.
    pub is_vararg: bool,
    /// `...` as the returns.
    pub is_varret: bool,
}

impl FunctionSchema {
    /// `aten::add.Tensor` / `aten::add` for the default overload.
    pub fn full_name(&self) -> String {
        if self.overload.is_empty() {
            self.name.clone()
        } else {
            format!("{}.{}", self.name, self.overload)
        }
    }

    /// The name without its namespace (`add`).
    pub fn base_name(&self) -> &str {
        self.name.rsplit_once("::").map_or(&self.name, |(_, n)| n)
    }

    pub fn namespace(&self) -> &str {
        self.name.split_once("::").map_or("", |(ns, _)| ns)
    }

    /// True if some argument is written to (in-place or out= forms).
    pub fn is_mutable(&self) -> bool {
        self.arguments.iter().any(Argument::is_write)
    }

    /// Positional arguments (before `*`).
    pub fn positional(&self) -> impl Iterator<Item = &Argument> {
        self.arguments.iter().filter(|a| !a.kwarg_only)
    }
}

impl fmt::Display for FunctionSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.full_name())?;
        let mut first = true;
        let mut star_written = false;
        for a in &self.arguments {
            if !first {
                f.write_str(", ")?;
            }
            if a.kwarg_only && !star_written {
                f.write_str("*, ")?;
                star_written = true;
            }
            write!(f, "{a}")?;
            first = false;
        }
        if self.is_vararg {
            if !first {
                f.write_str(", ")?;
            }
            f.write_str("...")?;
        }
        f.write_str(") -> ")?;
        if self.is_varret {
            return f.write_str("...");
        }
        // One return prints bare, named or not, as c10 prints it, unless its type itself starts
        // with '(' (a tuple type), which would read as a return list.
        let single = self.returns.len() == 1 && !self.returns[0].ty.base_name.starts_with('(');
        if !single {
            f.write_str("(")?;
        }
        for (i, r) in self.returns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        if !single {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Splits `s` at top-level commas (outside brackets, parentheses and quotes).
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) => {
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' => depth += 1,
                ')' | ']' => {
                    depth -= 1;
                    if depth < 0 {
                        return Err(format!("unbalanced '{c}' at byte {i}"));
                    }
                }
                ',' if depth == 0 => {
                    parts.push(s[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            },
        }
    }
    if depth != 0 || quote.is_some() {
        return Err("unbalanced brackets or quotes".into());
    }
    let last = s[start..].trim();
    if !last.is_empty() || !parts.is_empty() {
        parts.push(last);
    }
    Ok(parts)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_alias(text: &str) -> Result<AliasInfo, String> {
    let (before, after) = match text.split_once("->") {
        Some((b, a)) => (b.trim(), Some(a.trim())),
        None => (text.trim(), None),
    };
    let (before, is_write) = match before.strip_suffix('!') {
        Some(b) => (b.trim(), true),
        None => (before, false),
    };
    let names = |s: &str| -> Result<Vec<String>, String> {
        s.split('|')
            .map(|n| {
                let n = n.trim();
                if n == "*" || is_identifier(n) {
                    Ok(n.to_string())
                } else {
                    Err(format!("bad alias set name '{n}'"))
                }
            })
            .collect()
    };
    Ok(AliasInfo {
        before: names(before)?,
        after: match after {
            Some(a) => names(a)?,
            None => Vec::new(),
        },
        is_write,
        after_list: false,
    })
}

/// JIT container types whose parentheses hold type arguments, not an alias annotation.
const CONTAINERS: [&str; 7] = [
    "Dict", "Tuple", "Future", "RRef", "Await", "Union", "Optional",
];

/// The index of the `)` that closes the `(` at `open`.
fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses type text: a base (`Tensor`, `__torch__.x.Y`, `Dict(str, Tensor)`), an optional alias
/// annotation after the base or after the list suffix, `?` and list suffixes (`str[][]` keeps
/// the inner list in the base's text).
fn parse_type(text: &str) -> Result<(Type, Option<AliasInfo>), String> {
    let text = text.trim();
    let mut base_end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(text.len());
    if base_end == 0 && text.starts_with('(') {
        // A tuple type: `(Tensor, tVal)`.
        base_end =
            matching_paren(text, 0).ok_or_else(|| format!("unclosed tuple type in '{text}'"))? + 1;
    }
    if base_end == 0 {
        return Err(format!("missing type in '{text}'"));
    }
    if CONTAINERS.contains(&&text[..base_end]) && text[base_end..].starts_with('(') {
        base_end = matching_paren(text, base_end)
            .ok_or_else(|| format!("unclosed type arguments in '{text}'"))?
            + 1;
    }
    let mut ty = Type {
        base: BaseType::parse(&text[..base_end]),
        base_name: text[..base_end].to_string(),
        elem_optional: false,
        list: None,
        optional: false,
    };
    let mut rest = &text[base_end..];
    let mut alias = None;
    loop {
        if rest.starts_with('(') {
            if alias.is_some() {
                return Err(format!("two alias annotations in '{text}'"));
            }
            let close = matching_paren(rest, 0)
                .ok_or_else(|| format!("unclosed alias annotation in '{text}'"))?;
            let mut a = parse_alias(&rest[1..close])?;
            a.after_list = ty.list.is_some();
            alias = Some(a);
            rest = &rest[close + 1..];
        } else if let Some(r) = rest.strip_prefix('?') {
            if ty.list.is_some() {
                if ty.optional {
                    return Err(format!("repeated '?' in '{text}'"));
                }
                ty.optional = true;
            } else if ty.elem_optional {
                return Err(format!("repeated '?' in '{text}'"));
            } else {
                ty.elem_optional = true;
            }
            rest = r;
        } else if let Some(r) = rest.strip_prefix('[') {
            if ty.list.is_some() {
                if ty.optional || alias.is_some() {
                    return Err(format!("unsupported nested list in '{text}'"));
                }
                // A list of lists: the inner list becomes part of the base's text.
                let consumed = text.len() - rest.len();
                ty.base_name = text[..consumed].to_string();
                ty.base = BaseType::Other;
                ty.elem_optional = false;
            }
            let close = r
                .find(']')
                .ok_or_else(|| format!("unclosed '[' in '{text}'"))?;
            let size = r[..close].trim();
            ty.list = Some(if size.is_empty() {
                None
            } else {
                Some(
                    size.parse::<usize>()
                        .map_err(|_| format!("bad list size '{size}' in '{text}'"))?,
                )
            });
            rest = &r[close + 1..];
        } else if rest.is_empty() {
            break;
        } else {
            return Err(format!("unexpected '{rest}' after type in '{text}'"));
        }
    }
    // `Tensor?` (no list) is an optional value, not an optional element.
    if ty.list.is_none() && ty.elem_optional {
        ty.elem_optional = false;
        ty.optional = true;
    }
    Ok((ty, alias))
}

/// Parses one `Type name=default` argument (name optional for returns).
fn parse_argument(text: &str, kwarg_only: bool, is_return: bool) -> Result<Argument, String> {
    let (decl, default) = match text.split_once('=') {
        Some((d, v)) if !is_return => (d.trim(), Some(v.trim().to_string())),
        Some(_) => return Err(format!("a return cannot have a default: '{text}'")),
        None => (text.trim(), None),
    };
    // The name is the last whitespace-separated word, unless the declaration is a bare type.
    let (type_text, name) = match decl.rfind(' ') {
        Some(i) if !decl[..i].trim().is_empty() && is_identifier(decl[i + 1..].trim()) => {
            (&decl[..i], decl[i + 1..].trim())
        }
        _ if is_return => (decl, ""),
        _ => return Err(format!("argument '{decl}' has no name")),
    };
    if default.as_deref() == Some("") {
        return Err(format!("empty default in '{text}'"));
    }
    let (ty, alias) = parse_type(type_text)?;
    let is_out = kwarg_only && alias.as_ref().is_some_and(|a| a.is_write);
    Ok(Argument {
        name: name.to_string(),
        ty,
        alias,
        default,
        kwarg_only,
        is_out,
    })
}

/// Parses a full schema. A name without `ns::` gets `default_namespace`.
pub fn parse_schema(text: &str, default_namespace: &str) -> Result<FunctionSchema, SchemaError> {
    let err = |reason: String| SchemaError {
        schema: text.to_string(),
        reason,
    };
    // Schemas written as Python triple-quoted strings span lines.
    let text = text.trim();
    let open = text
        .find('(')
        .ok_or_else(|| err("missing '(' after the name".into()))?;
    let name_part = text[..open].trim();
    // The argument list ends at the ')' that balances the first '('.
    let mut depth = 0i32;
    let mut close = None;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text[open..].char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' => depth += 1,
                ')' | ']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            },
        }
    }
    let close = close.ok_or_else(|| err("unbalanced argument list".into()))?;
    let (qualified, overload) = match name_part.split_once('.') {
        Some((n, o)) => (n, o),
        None => (name_part, ""),
    };
    let (ns, base) = match qualified.split_once("::") {
        Some((ns, b)) => (ns, b),
        None => (default_namespace, qualified),
    };
    if !is_identifier(base) || !(ns.is_empty() || is_identifier(ns)) {
        return Err(err(format!("bad operator name '{name_part}'")));
    }
    if !overload.is_empty() && !is_identifier(overload) {
        return Err(err(format!("bad overload name '{overload}'")));
    }
    let name = if ns.is_empty() {
        base.to_string()
    } else {
        format!("{ns}::{base}")
    };

    let mut arguments = Vec::new();
    let mut kwarg_only = false;
    let mut is_vararg = false;
    for part in split_top_level(&text[open + 1..close]).map_err(err)? {
        if is_vararg {
            return Err(err("'...' must be the last argument".into()));
        }
        match part {
            "" => return Err(err("empty argument".into())),
            "*" => {
                if kwarg_only {
                    return Err(err("'*' given twice".into()));
                }
                kwarg_only = true;
            }
            "..." => is_vararg = true,
            _ => arguments.push(parse_argument(part, kwarg_only, false).map_err(err)?),
        }
    }
    // Repeated argument names are accepted, as c10's parser accepts them (one of upstream's own
    // static_runtime schemas has one).

    let after = text[close + 1..].trim();
    let ret_text = after
        .strip_prefix("->")
        .ok_or_else(|| err("missing '->' and return type".into()))?
        .trim();
    let mut returns = Vec::new();
    let mut is_varret = false;
    if ret_text == "..." {
        is_varret = true;
    } else if let Some(inner) = ret_text.strip_prefix('(') {
        let inner = inner
            .strip_suffix(')')
            .ok_or_else(|| err("unclosed return tuple".into()))?;
        for part in split_top_level(inner).map_err(err)? {
            returns.push(parse_argument(part, false, true).map_err(err)?);
        }
    } else if ret_text.is_empty() {
        return Err(err("empty return type".into()));
    } else {
        returns.push(parse_argument(ret_text, false, true).map_err(err)?);
    }
    Ok(FunctionSchema {
        name,
        overload: overload.to_string(),
        arguments,
        returns,
        is_vararg,
        is_varret,
    })
}
