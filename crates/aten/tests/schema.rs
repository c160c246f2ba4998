//! Schema grammar: round trips through Display, argument kinds, and errors on malformed text.

use torchnative_aten::{parse_schema, BaseType, Registry};

#[test]
fn parses_kwarg_only_default_and_returns() {
    let s = parse_schema(
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "aten",
    )
    .unwrap();
    assert_eq!(s.full_name(), "aten::add.Tensor");
    assert_eq!(s.arguments.len(), 3);
    assert!(!s.arguments[1].kwarg_only);
    assert!(s.arguments[2].kwarg_only);
    assert_eq!(s.arguments[2].default.as_deref(), Some("1"));
    assert_eq!(s.arguments[2].ty.base, BaseType::Scalar);
    assert_eq!(s.returns.len(), 1);
    assert!(!s.is_mutable());
}

#[test]
fn parses_alias_lists_and_optionals() {
    let text = "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)";
    let s = parse_schema(text, "aten").unwrap();
    assert!(s.is_mutable());
    let idx = &s.arguments[1];
    assert!(idx.ty.elem_optional && !idx.ty.optional);
    assert_eq!(idx.ty.list, Some(None));
    assert_eq!(s.to_string(), format!("aten::{text}"));

    let s = parse_schema(
        "max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
        "aten",
    )
    .unwrap();
    assert!(s.arguments[3].is_out && s.arguments[4].is_out);
    assert_eq!(s.returns[1].name, "indices");

    let s = parse_schema(
        "conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0) -> Tensor",
        "aten",
    )
    .unwrap();
    assert!(s.arguments[2].ty.optional);
    assert_eq!(s.arguments[3].ty.list, Some(Some(2)));
}

#[test]
fn round_trips_every_form() {
    for text in [
        "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
        "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "mylib::foo(Tensor x, str mode=\"a,b\") -> (Tensor, Tensor)",
        "aten::_foreach_add.List(Tensor[] self, Tensor[] other, *, Scalar alpha=1) -> Tensor[]",
        "prim::thing(...) -> ...",
    ] {
        let s = parse_schema(text, "aten").unwrap();
        assert_eq!(s.to_string(), text);
    }
}

#[test]
fn rejects_malformed_text_with_a_reason() {
    for bad in [
        "",
        "add",
        "add(Tensor self",
        "add(Tensor self) Tensor",
        "add(Tensor) -> Tensor",
        "add(Tensor self, *, *, int a) -> Tensor",
        "add(Tensor[x] self) -> Tensor",
        "add(Tensor(a self) -> Tensor",
        "a-b(Tensor self) -> Tensor",
        "add(Tensor self, ..., int x) -> Tensor",
        "add(Tensor self) -> ",
        "add(Tensor self) -> (Tensor x=1)",
    ] {
        let err = parse_schema(bad, "aten").unwrap_err();
        assert_eq!(err.schema, bad);
        assert!(!err.reason.is_empty());
    }
}

#[test]
fn registry_reads_variants_modules_and_dispatch() {
    let yaml = "\
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  device_check: NoCheck   # TensorIterator
  structured_delegate: add.out
  variants: function, method
  dispatch:
    SparseCPU, SparseCUDA: add_sparse
  tags: [core, pointwise]

- func: linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
  python_module: nn

- func: relu(Tensor self) -> Tensor
  variants: method
  dispatch:
    CPU, CUDA: relu
  autogen: relu.out
";
    let reg = Registry::parse(yaml).unwrap();
    // Three entries plus the autogen relu.out.
    assert_eq!(reg.functions.len(), 4);
    assert_eq!(
        reg.get("aten::relu.out").unwrap().schema.to_string(),
        "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"
    );
    let add = reg.get("aten::add.Tensor").unwrap();
    assert!(add.function && add.method);
    assert!(add.has_kernel_for("CPU") && add.has_kernel_for("SparseCUDA"));
    assert!(!add.is_composite_implicit());
    assert_eq!(add.tags, ["core", "pointwise"]);
    let linear = reg.get("aten::linear").unwrap();
    assert_eq!(linear.python_module.as_deref(), Some("nn"));
    assert!(linear.is_composite_implicit());
    let relu = reg.get("aten::relu").unwrap();
    assert!(relu.method && !relu.function);
    assert_eq!(relu.autogen, ["relu.out"]);
    assert_eq!(reg.overloads("add").count(), 1);
}

#[test]
fn registry_error_names_the_line() {
    let err = Registry::parse("- func: add(Tensor self) -> Tensor\n- func: bad(\n").unwrap_err();
    assert_eq!(err.line, 2);
    let err = Registry::parse("- func: add(Tensor self) -> Tensor\n variants: x\n").unwrap_err();
    assert_eq!(err.line, 2);
}

/// Every entry of upstream's own file parses and prints back as written (whitespace aside).
#[test]
fn upstream_native_functions_yaml_parses() {
    let Some(yaml) = torchnative_testing::upstream_native_functions_yaml() else {
        return;
    };
    let reg = Registry::parse(&yaml).unwrap();
    assert!(
        reg.functions.len() > 2500,
        "{} entries",
        reg.functions.len()
    );
    for line in yaml.lines() {
        if let Some(text) = line.strip_prefix("- func: ") {
            let text = text.split(" #").next().unwrap().trim();
            let s = torchnative_aten::parse_schema(text, "aten").unwrap();
            assert_eq!(s.to_string(), format!("aten::{text}"));
        }
    }
}

/// Upstream's schemas from outside the yaml (JIT containers, aliases after lists, nested lists)
/// parse and print back as written, and join the registry without clashing with the yaml.
#[test]
fn upstream_extra_schemas_parse_and_register() {
    let mut count = 0;
    for line in torchnative_aten::UPSTREAM_EXTRA_SCHEMAS.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let line = &line[2..];
        let s = parse_schema(line, "aten").unwrap();
        assert_eq!(s.to_string(), line);
        count += 1;
    }
    assert!(count > 1000, "{count} schemas");
    let mut reg = Registry::parse("- func: size.int(Tensor self, int dim) -> int\n").unwrap();
    reg.add_extra_schemas(torchnative_aten::UPSTREAM_EXTRA_SCHEMAS)
        .unwrap();
    let size: Vec<_> = reg
        .overloads_of("aten::size")
        .map(|f| f.schema.overload.clone())
        .collect();
    assert!(size.contains(&"int".to_string()) && size.contains(&String::new()));
    let device = reg.get("prim::device").unwrap();
    assert!(device.extra && !device.is_composite_implicit() && !device.in_dispatcher);
    assert!(reg.get("quantized::elu").unwrap().in_dispatcher);
    let err = reg
        .add_extra_schemas("aten::x(Tensor a) -> Tensor\n")
        .unwrap_err();
    assert_eq!(err.line, 1);
}

#[test]
fn jit_type_forms_round_trip() {
    for text in [
        "aten::Delete.Dict_str(Dict(str, t)(a!) self, str key) -> ()",
        "c10d::allreduce_(Tensor[](a!) tensors, int timeout=-1) -> (Tensor[](a!), Tensor)",
        "_test::get_first(str[][] _0) -> str _0",
        "prim::TupleUnpack(Any tup) -> ...",
        "aten::wait(Future(t) self) -> t",
    ] {
        assert_eq!(parse_schema(text, "aten").unwrap().to_string(), text);
    }
}
