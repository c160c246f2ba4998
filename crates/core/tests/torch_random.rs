//! `torch_random` against upstream torch: exact bits for every distribution, dtype, size
//! and seed in the tables below, checked by running the oracle venv's torch on the same
//! steps (both `torch.manual_seed` and explicit `torch.Generator`s, at 1 and 2 threads), plus
//! values recorded from that oracle so the file still checks something without Python.

use half::{bf16, f16};
use serde_json::{json, Value};
use std::process::Command;
use torchnative_core::torch_random::{
    bernoulli_scalar_, bernoulli_tensor_, exponential_, multinomial, normal_, normal_serial_,
    randint, random_, random_from_to_, randperm, uniform_, CpuGenerator, DEFAULT_SEED,
    LEGACY_STATE_SIZE, STATE_SIZE,
};
use torchnative_core::Element;

/// The element's bit pattern (floats) or value (integers, as two's complement), as the
/// oracle script prints it.
trait Bits: Element {
    fn bits(self) -> u64;
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}
impl Bits for f16 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for bf16 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
macro_rules! int_bits {
    ($($t:ty),*) => {$(impl Bits for $t {
        fn bits(self) -> u64 {
            self as i64 as u64
        }
    })*};
}
int_bits!(i64, i32, i16, i8, u8, bool);

fn bits_of<T: Bits>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Runs `$body` with `$T` bound to the element type named by `$dtype`.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            "f32" => {
                type $T = f32;
                $body
            }
            "f64" => {
                type $T = f64;
                $body
            }
            "f16" => {
                type $T = f16;
                $body
            }
            "bf16" => {
                type $T = bf16;
                $body
            }
            "i64" => {
                type $T = i64;
                $body
            }
            "i32" => {
                type $T = i32;
                $body
            }
            "i16" => {
                type $T = i16;
                $body
            }
            "i8" => {
                type $T = i8;
                $body
            }
            "u8" => {
                type $T = u8;
                $body
            }
            "bool" => {
                type $T = bool;
                $body
            }
            other => panic!("unknown dtype {other}"),
        }
    };
}

fn f(step: &Value, key: &str) -> f64 {
    step[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {step}"))
}
fn i(step: &Value, key: &str) -> i64 {
    step[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} in {step}"))
}
fn s<'a>(step: &'a Value, key: &str) -> &'a str {
    step[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {step}"))
}
fn probs(step: &Value) -> Vec<f64> {
    step["probs"]
        .as_array()
        .expect("probs")
        .iter()
        .map(|v| v.as_f64().expect("a probability"))
        .collect()
}

/// One step on `gen`: the output bits, or the error text.
fn run_step(gen: &mut CpuGenerator, step: &Value) -> Result<Vec<u64>, String> {
    let dtype = step["dtype"].as_str().unwrap_or("f32");
    let r = with_dtype!(dtype, T => {
        let mut out = vec![T::default(); step["n"].as_u64().unwrap_or(0) as usize];
        let res = match s(step, "op") {
            "uniform" => uniform_(gen, &mut out, f(step, "from"), f(step, "to")),
            "normal" => normal_(gen, &mut out, f(step, "mean"), f(step, "std")),
            "normal_serial" => normal_serial_(gen, &mut out, f(step, "mean"), f(step, "std")),
            "randint" => randint(gen, &mut out, i(step, "low"), i(step, "high")),
            "random_from" => {
                random_from_to_(gen, &mut out, i(step, "from"), step["to"].as_i64())
            }
            "random" => random_(gen, &mut out),
            "randperm" => randperm(gen, &mut out),
            "exponential" => exponential_(gen, &mut out, f(step, "lambd")),
            "bernoulli_scalar" => bernoulli_scalar_(gen, &mut out, f(step, "p")),
            "bernoulli_tensor" => {
                let p = probs(step);
                with_dtype!(s(step, "pdtype"), P => {
                    let p: Vec<P> = p.iter().map(|&x| P::from_f64(x)).collect();
                    bernoulli_tensor_(gen, &mut out, &p)
                })
            }
            "multinomial" => {
                let p = probs(step);
                let cats = i(step, "cats") as usize;
                let k = i(step, "k") as usize;
                let repl = step["replacement"].as_bool().expect("replacement");
                return with_dtype!(dtype, P => {
                    let p: Vec<P> = p.iter().map(|&x| P::from_f64(x)).collect();
                    multinomial(gen, &p, cats, k, repl)
                        .map(|v| v.iter().map(|&x| x as u64).collect())
                        .map_err(|e| e.to_string())
                });
            }
            other => panic!("unknown op {other}"),
        };
        res.map(|()| bits_of(&out))
    });
    r.map_err(|e| e.to_string())
}

/// A case: a fresh generator (`torch.manual_seed` or an explicit `torch.Generator`), some
/// steps, then a probe of the stream position (`random_()` on 4 int64 elements).
struct Case {
    seed: u64,
    explicit: bool,
    steps: Vec<Value>,
}

fn run_case(case: &Case) -> Value {
    let mut gen = CpuGenerator::new(case.seed);
    let mut results = Vec::new();
    for step in &case.steps {
        match run_step(&mut gen, step) {
            Ok(bits) => results.push(json!({ "ok": bits })),
            Err(e) => {
                results.push(json!({ "err": e }));
                return json!({ "steps": results });
            }
        }
    }
    let mut probe = [0i64; 4];
    random_(&mut gen, &mut probe).expect("random_ on int64");
    let state: String = gen.get_state().iter().map(|b| format!("{b:02x}")).collect();
    json!({ "steps": results, "probe": bits_of(&probe), "state": state })
}

const ORACLE: &str = r#"
import json, sys, torch
cases = json.load(open(sys.argv[1]))
torch.set_num_threads(int(sys.argv[2]))
DT = {'f32': torch.float32, 'f64': torch.float64, 'f16': torch.float16,
      'bf16': torch.bfloat16, 'i64': torch.int64, 'i32': torch.int32, 'i16': torch.int16,
      'i8': torch.int8, 'u8': torch.uint8, 'bool': torch.bool}
def bits(t):
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.float32: return [x & 0xffffffff for x in t.view(torch.int32).tolist()]
    if t.dtype == torch.float64: return [x & 0xffffffffffffffff for x in t.view(torch.int64).tolist()]
    if t.dtype in (torch.float16, torch.bfloat16): return [x & 0xffff for x in t.view(torch.int16).tolist()]
    return [int(x) & 0xffffffffffffffff for x in t.tolist()]
def run(st, g):
    op = st['op']; dt = DT[st.get('dtype', 'f32')]; n = st.get('n', 0)
    e = lambda: torch.empty(n, dtype=dt)
    if op == 'uniform': return e().uniform_(st['from'], st['to'], generator=g)
    if op == 'normal': return e().normal_(st['mean'], st['std'], generator=g)
    if op == 'normal_serial':
        # A non-contiguous view takes the element-by-element path at any size.
        t = torch.empty(2 * n, dtype=dt)[::2]
        return t.normal_(st['mean'], st['std'], generator=g)
    if op == 'randint': return torch.randint(st['low'], st['high'], (n,), dtype=dt, generator=g)
    if op == 'random_from': return e().random_(st['from'], st.get('to'), generator=g)
    if op == 'random': return e().random_(generator=g)
    if op == 'randperm': return torch.randperm(n, dtype=dt, generator=g)
    if op == 'exponential': return e().exponential_(st['lambd'], generator=g)
    if op == 'bernoulli_scalar': return e().bernoulli_(st['p'], generator=g)
    if op == 'bernoulli_tensor':
        p = torch.tensor(st['probs'], dtype=torch.float64).to(DT[st['pdtype']])
        return e().bernoulli_(p, generator=g)
    if op == 'multinomial':
        p = torch.tensor(st['probs'], dtype=torch.float64).to(dt).reshape(-1, st['cats'])
        if st.get('one_d'): p = p.reshape(-1)
        return torch.multinomial(p, st['k'], st['replacement'], generator=g)
    raise ValueError(op)
out = []
for case in cases:
    if case['explicit']:
        g = torch.Generator(); g.manual_seed(case['seed'])
    else:
        torch.manual_seed(case['seed']); g = None
    res = []
    failed = False
    for st in case['steps']:
        try:
            res.append({'ok': bits(run(st, g))})
        except Exception as ex:
            res.append({'err': str(ex)}); failed = True; break
    if failed:
        out.append({'steps': res}); continue
    probe = bits(torch.empty(4, dtype=torch.int64).random_(generator=g))
    st = (g.get_state() if g is not None else torch.get_rng_state()).numpy().tobytes().hex()
    out.append({'steps': res, 'probe': probe, 'state': st})
json.dump(out, sys.stdout)
"#;

/// Runs the oracle on `cases` at `threads` threads; `None` (after `skipped:`) without it.
fn oracle(cases: &[Case], threads: usize) -> Option<Vec<Value>> {
    let python = torchnative_testing::oracle_python()?;
    let dir = torchnative_testing::temp_dir("torch-random");
    let script = dir.join("oracle.py");
    std::fs::write(&script, ORACLE).expect("writing the oracle script");
    let input: Vec<Value> = cases
        .iter()
        .map(|c| json!({ "seed": c.seed, "explicit": c.explicit, "steps": c.steps }))
        .collect();
    let cases_path = dir.join("cases.json");
    std::fs::write(
        &cases_path,
        serde_json::to_vec(&input).expect("cases serialize"),
    )
    .expect("writing the cases");
    let out = Command::new(python)
        .arg("-W")
        .arg("ignore")
        .arg(&script)
        .arg(&cases_path)
        .arg(threads.to_string())
        .output()
        .expect("cannot start the oracle python");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Some(serde_json::from_slice(&out.stdout).expect("oracle output is JSON"))
}

/// Compares every case with the oracle at 1 and 2 threads; errors must match in kind (both
/// fail), values and stream positions exactly.
fn check_against_oracle(name: &str, cases: Vec<Case>) {
    let ours: Vec<Value> = cases.iter().map(run_case).collect();
    for threads in [2, 1] {
        let Some(theirs) = oracle(&cases, threads) else {
            return;
        };
        let mut failures = Vec::new();
        for ((case, ours), theirs) in cases.iter().zip(&ours).zip(&theirs) {
            let ctx = format!(
                "{name}: seed {} explicit {} threads {threads} steps {}",
                case.seed,
                case.explicit,
                serde_json::to_string(&case.steps).unwrap_or_default()
            );
            let (os, ts) = (&ours["steps"], &theirs["steps"]);
            let (os, ts) = (os.as_array().unwrap(), ts.as_array().unwrap());
            if os.len() != ts.len() {
                failures.push(format!("{ctx}: ours {os:?} vs upstream {ts:?}"));
                continue;
            }
            for (k, (o, t)) in os.iter().zip(ts).enumerate() {
                match (o.get("ok"), t.get("ok")) {
                    (Some(a), Some(b)) if a == b => {}
                    (Some(a), Some(b)) => {
                        let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
                        let first = a.iter().zip(b).position(|(x, y)| x != y);
                        let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
                        failures.push(format!(
                            "{ctx}: step {k}: {differ} of {} values differ (lengths {} / {}), \
                             first at {first:?}: ours {:?} upstream {:?}",
                            a.len(),
                            a.len(),
                            b.len(),
                            first.map(|p| &a[p]),
                            first.map(|p| &b[p]),
                        ));
                    }
                    (None, None) => {}
                    _ => failures.push(format!("{ctx}: step {k}: ours {o} vs upstream {t}")),
                }
            }
            if ours.get("probe") != theirs.get("probe") {
                failures.push(format!(
                    "{ctx}: stream position differs after the steps: probe {:?} vs {:?}",
                    ours.get("probe"),
                    theirs.get("probe")
                ));
            } else if ours.get("state") != theirs.get("state") {
                failures.push(format!("{ctx}: get_state bytes differ"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases differ from upstream:\n{}",
            failures.len(),
            cases.len(),
            failures[..failures.len().min(20)].join("\n")
        );
    }
}

const SEEDS: [u64; 5] = [0, 42, 12345, (1 << 40) + 3, u64::MAX];

/// Every seed, alternating `torch.manual_seed` and explicit generators.
fn cases_for(steps: Vec<Vec<Value>>) -> Vec<Case> {
    let mut cases = Vec::new();
    for (k, steps) in steps.into_iter().enumerate() {
        for (j, &seed) in SEEDS.iter().enumerate() {
            cases.push(Case {
                seed,
                explicit: (j + k) % 2 == 1,
                steps: steps.clone(),
            });
        }
    }
    cases
}

const FLOATS: [&str; 4] = ["f32", "f64", "f16", "bf16"];

#[test]
fn uniform_matches_upstream() {
    let mut steps = Vec::new();
    for dtype in FLOATS {
        for n in [1, 2, 3, 15, 16, 17, 100, 1000] {
            for (from, to) in [(0.0, 1.0), (-3.7, 5.1), (2.5, 2.501), (-1e3, 1e4)] {
                steps.push(vec![
                    json!({"op": "uniform", "dtype": dtype, "n": n, "from": from, "to": to}),
                ]);
            }
        }
    }
    check_against_oracle("uniform_", cases_for(steps));
}

#[test]
fn normal_matches_upstream() {
    let mut steps = Vec::new();
    for dtype in FLOATS {
        for n in [1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 1000, 4097] {
            for (mean, std) in [(0.0, 1.0), (0.3, 2.7), (-5.0, 0.01)] {
                steps.push(vec![
                    json!({"op": "normal", "dtype": dtype, "n": n, "mean": mean, "std": std}),
                ]);
            }
        }
        // The cached double sample carries across calls and through the serial path.
        steps.push(vec![
            json!({"op": "normal", "dtype": dtype, "n": 3, "mean": 1.5, "std": 0.7}),
            json!({"op": "normal", "dtype": dtype, "n": 20, "mean": 0.0, "std": 1.0}),
            json!({"op": "normal", "dtype": dtype, "n": 5, "mean": -2.0, "std": 3.0}),
            json!({"op": "normal_serial", "dtype": dtype, "n": 40, "mean": 0.25, "std": 1.25}),
            json!({"op": "uniform", "dtype": dtype, "n": 3, "from": 0.0, "to": 1.0}),
        ]);
    }
    // Many blocks of the float kernel.
    steps.push(vec![
        json!({"op": "normal", "dtype": "f32", "n": 65_537, "mean": 0.3, "std": 2.7}),
    ]);
    check_against_oracle("normal_", cases_for(steps));
}

#[test]
fn randint_and_random_match_upstream() {
    let ranges: [(i64, i64); 19] = [
        (0, 100),
        (0, 2),
        (-5, 5),
        (3, 4),
        (0, 128),
        (0, 256),
        (0, 2048),
        (0, 1 << 24),
        (0, (1 << 28) - 1),
        (0, 1 << 28),
        (0, (1 << 28) + 1),
        (0, 1 << 31),
        (0, 1 << 32),
        (0, (1 << 32) + 1),
        (0, 1 << 40),
        (0, 1 << 53),
        (-(1 << 30), 1 << 30),
        (1_000_000_000, 1_000_000_007),
        (-(1 << 40), 1 << 40),
    ];
    let dtypes = [
        "i64", "i32", "i16", "i8", "u8", "bool", "f32", "f64", "f16", "bf16",
    ];
    let mut steps = Vec::new();
    for dtype in dtypes {
        for (low, high) in ranges {
            for n in [1, 6, 17] {
                steps.push(vec![
                    json!({"op": "randint", "dtype": dtype, "n": n, "low": low, "high": high}),
                ]);
            }
        }
        steps.push(vec![json!({"op": "random", "dtype": dtype, "n": 50})]);
        for from in [0i64, -7, 100, i64::MIN] {
            steps.push(vec![
                json!({"op": "random_from", "dtype": dtype, "n": 20, "from": from, "to": null}),
            ]);
        }
    }
    // An empty output still checks the bounds; the stream does not move.
    steps.push(vec![
        json!({"op": "randint", "dtype": "i32", "n": 0, "low": 0, "high": 1i64 << 32}),
    ]);
    steps.push(vec![
        json!({"op": "randint", "dtype": "i64", "n": 0, "low": 0, "high": 10}),
    ]);
    steps.push(vec![
        json!({"op": "randint", "dtype": "i64", "n": 3, "low": 5, "high": 5}),
    ]);
    check_against_oracle("randint", cases_for(steps));
}

#[test]
fn randperm_matches_upstream() {
    let mut steps = Vec::new();
    for (dtype, max_n) in [
        ("i64", 40_000),
        ("i32", 40_000),
        ("i16", 30_000),
        ("u8", 256),
        ("f32", 40_000),
        ("f64", 40_000),
        ("f16", 2049),
        ("bf16", 1000),
    ] {
        for n in [0usize, 1, 2, 6, 17, 100, 256, 257, 1000, 2049, 2050, 30_001] {
            if n <= max_n || n == 2050 || n == 257 {
                steps.push(vec![json!({"op": "randperm", "dtype": dtype, "n": n})]);
            }
        }
    }
    steps.push(vec![json!({"op": "randperm", "dtype": "bool", "n": 2})]);
    check_against_oracle("randperm", cases_for(steps));
}

#[test]
fn bernoulli_matches_upstream() {
    let mut steps = Vec::new();
    for dtype in ["f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"] {
        for p in [0.0, 0.3, 0.5, 0.9, 1.0] {
            for n in [1, 17, 1000, 3000] {
                steps.push(vec![
                    json!({"op": "bernoulli_scalar", "dtype": dtype, "n": n, "p": p}),
                ]);
            }
        }
    }
    steps.push(vec![
        json!({"op": "bernoulli_scalar", "dtype": "f32", "n": 3, "p": 1.5}),
    ]);
    for (pdtype, denom) in [
        ("f32", 65536.0),
        ("f64", 65536.0),
        ("f16", 256.0),
        ("bf16", 256.0),
    ] {
        for out in ["f32", "f64", "i64", "bool"] {
            for n in [1, 17, 1000] {
                let probs: Vec<f64> = (0..n)
                    .map(|k: u64| ((k * 7919 + 13) % (denom as u64 + 1)) as f64 / denom)
                    .collect();
                steps.push(vec![json!({"op": "bernoulli_tensor", "dtype": out, "pdtype": pdtype, "n": n, "probs": probs})]);
            }
        }
    }
    check_against_oracle("bernoulli_", cases_for(steps));
}

#[test]
fn multinomial_and_exponential_match_upstream() {
    let mut steps = Vec::new();
    for dtype in FLOATS {
        for n in [1, 16, 1000] {
            for lambd in [1.0, 0.5, 3.3] {
                steps.push(vec![
                    json!({"op": "exponential", "dtype": dtype, "n": n, "lambd": lambd}),
                ]);
            }
        }
        for (rows, cats) in [(1usize, 5usize), (3, 7), (1, 100), (2, 1000)] {
            let probs: Vec<f64> = (0..rows * cats)
                .map(|k| ((k * 37 + 11) % 23) as f64 / 16.0)
                .collect();
            for (k, replacement) in [
                (1, true),
                (1, false),
                (3, false),
                (3, true),
                (5, false),
                (50, true),
            ] {
                if !replacement && k > cats {
                    continue;
                }
                steps.push(vec![
                    json!({"op": "multinomial", "dtype": dtype, "probs": probs,
                    "cats": cats, "k": k, "replacement": replacement, "one_d": rows == 1}),
                ]);
            }
        }
    }
    // Equal keys: coarse half/bfloat16 keys, and zero weights once the non-zero ones are
    // used up, through both of topk's selection paths (partial_sort when 64 k <= n, else
    // nth_element + sort).
    for dtype in ["bf16", "f16", "f32"] {
        for (cats, nonzero, k) in [
            (1000, 1000, 3),
            (1000, 1000, 20),
            (300, 10, 20),
            (2000, 5, 10),
            (7, 2, 6),
        ] {
            let probs: Vec<f64> = (0..cats)
                .map(|j| if j % (cats / nonzero) == 0 { 1.0 } else { 0.0 })
                .collect();
            steps.push(vec![
                json!({"op": "multinomial", "dtype": dtype, "probs": probs,
                "cats": cats, "k": k, "replacement": false, "one_d": true}),
            ]);
        }
    }
    // Zero weights are never drawn, with or without replacement.
    steps.push(vec![
        json!({"op": "multinomial", "dtype": "f32", "probs": [0.0, 1.0, 0.0, 2.0],
        "cats": 4, "k": 2, "replacement": false, "one_d": true}),
    ]);
    steps.push(vec![
        json!({"op": "multinomial", "dtype": "f32", "probs": [0.0, 1.0, 0.0, 2.0],
        "cats": 4, "k": 20, "replacement": true, "one_d": true}),
    ]);
    steps.push(vec![
        json!({"op": "multinomial", "dtype": "f32", "probs": [1.0, 1.0],
        "cats": 2, "k": 3, "replacement": false, "one_d": true}),
    ]);
    steps.push(vec![
        json!({"op": "multinomial", "dtype": "f64", "probs": [0.0, 0.0],
        "cats": 2, "k": 1, "replacement": true, "one_d": true}),
    ]);
    check_against_oracle("multinomial/exponential_", cases_for(steps));
}

#[test]
fn invalid_arguments_fail_like_upstream() {
    let steps = vec![
        vec![json!({"op": "randint", "dtype": "i64", "n": 3, "low": 10, "high": 3})],
        vec![json!({"op": "randint", "dtype": "i8", "n": 3, "low": 0, "high": 1000})],
        vec![
            json!({"op": "randint", "dtype": "f16", "n": 3, "low": 1_000_000_000, "high": 1_000_000_007}),
        ],
        vec![json!({"op": "uniform", "dtype": "f32", "n": 3, "from": 2.0, "to": 1.0})],
        vec![json!({"op": "uniform", "dtype": "f16", "n": 3, "from": 0.0, "to": 1e6})],
        vec![json!({"op": "normal", "dtype": "f32", "n": 3, "mean": 0.0, "std": -1.0})],
        vec![json!({"op": "exponential", "dtype": "f64", "n": 3, "lambd": -1.0})],
        vec![json!({"op": "randperm", "dtype": "f16", "n": 3000})],
        vec![json!({"op": "randperm", "dtype": "i8", "n": 300})],
        vec![
            json!({"op": "multinomial", "dtype": "f32", "probs": [1.0, -1.0], "cats": 2, "k": 1, "replacement": false, "one_d": true}),
        ],
        vec![
            json!({"op": "multinomial", "dtype": "f32", "probs": [1.0, 2.0], "cats": 2, "k": 3, "replacement": false, "one_d": true}),
        ],
        vec![
            json!({"op": "multinomial", "dtype": "f32", "probs": [0.0, 0.0], "cats": 2, "k": 2, "replacement": true, "one_d": true}),
        ],
        vec![
            json!({"op": "bernoulli_tensor", "dtype": "f32", "pdtype": "f32", "n": 2, "probs": [0.5, 1.5]}),
        ],
    ];
    check_against_oracle("errors", cases_for(steps));
}

/// States saved by upstream restore into ours and the other way round, including the
/// cached double normal sample.
#[test]
fn state_round_trips_with_upstream() {
    let Some(python) = torchnative_testing::oracle_python() else {
        return;
    };
    // Ours -> upstream: a state with a cached sample and a partly used block.
    let mut gen = CpuGenerator::new(2024);
    let mut x = [0.0f64; 3];
    normal_(&mut gen, &mut x, 0.0, 1.0).unwrap();
    let hex: String = gen.get_state().iter().map(|b| format!("{b:02x}")).collect();
    let mut expect = [0.0f32; 20];
    normal_(&mut gen, &mut expect[..5], 0.0, 1.0).unwrap();
    uniform_(&mut gen, &mut expect[5..], 0.0, 1.0).unwrap();

    let script = format!(
        "import torch, json\n\
         s = torch.tensor(list(bytes.fromhex('{hex}')), dtype=torch.uint8)\n\
         torch.set_rng_state(s)\n\
         a = torch.empty(5).normal_().tolist() + torch.rand(15).tolist()\n\
         torch.manual_seed(777); torch.randn(3, dtype=torch.float64)\n\
         st = torch.get_rng_state().numpy().tobytes().hex()\n\
         print(json.dumps({{'a': [float(v) for v in a], 'state': st}}))\n"
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(&script)
        .output()
        .expect("cannot start the oracle python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let theirs: Vec<f32> = v["a"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(
        bits_of(&theirs),
        bits_of(&expect),
        "upstream continuing our state"
    );

    // Upstream -> ours.
    let bytes: Vec<u8> = (0..STATE_SIZE)
        .map(|k| u8::from_str_radix(&v["state"].as_str().unwrap()[2 * k..2 * k + 2], 16).unwrap())
        .collect();
    let mut restored = CpuGenerator::new(0);
    restored.set_state(&bytes).unwrap();
    let mut direct = CpuGenerator::new(777);
    let mut y = [0.0f64; 3];
    normal_(&mut direct, &mut y, 0.0, 1.0).unwrap();
    assert!(direct.next_double_normal_sample().is_some());
    assert_eq!(restored, direct);
    assert_eq!(restored.get_state(), bytes);
}

// ---------------------------------------------------------------- without the oracle

/// The C++ standard's check value for `std::mt19937`: the 10000th draw from the default
/// seed 5489 is 4123659995.
#[test]
fn mt19937_standard_check_value() {
    let mut gen = CpuGenerator::new(5489);
    let mut last = 0;
    for _ in 0..10_000 {
        last = gen.random();
    }
    assert_eq!(last, 4_123_659_995);
}

/// Values recorded from torch 2.15.0 (`torch.manual_seed(42)` unless noted).
#[test]
fn recorded_upstream_values() {
    let gen = || CpuGenerator::new(42);

    let mut g = gen();
    let mut r = [0.0f32; 3];
    uniform_(&mut g, &mut r, 0.0, 1.0).unwrap();
    assert_eq!(bits_of(&r), RAND3_F32);

    let mut g = gen();
    let mut r = [0.0f32; 3];
    normal_(&mut g, &mut r, 0.0, 1.0).unwrap();
    assert_eq!(bits_of(&r), RANDN3_F32);

    let mut g = gen();
    let mut r = [0.0f32; 17];
    normal_(&mut g, &mut r, 0.0, 1.0).unwrap();
    assert_eq!(bits_of(&r[..4]), RANDN17_F32_HEAD);
    assert_eq!(bits_of(&r[13..]), RANDN17_F32_TAIL);

    let mut g = gen();
    let mut r = [0.0f64; 16];
    normal_(&mut g, &mut r, 0.0, 1.0).unwrap();
    assert_eq!(bits_of(&r[..2]), RANDN16_F64_HEAD);

    let mut g = gen();
    let mut r = [0i64; 6];
    randint(&mut g, &mut r, 0, 100).unwrap();
    assert_eq!(r, RANDINT6);

    let mut g = gen();
    let mut r = [0i64; 3];
    randint(&mut g, &mut r, 0, 1 << 40).unwrap();
    assert_eq!(r, RANDINT_WIDE3);

    let mut g = gen();
    let mut r = [0i64; 8];
    randperm(&mut g, &mut r).unwrap();
    assert_eq!(r, RANDPERM8);

    let mut g = gen();
    let mut r = [0.0f32; 8];
    bernoulli_scalar_(&mut g, &mut r, 0.5).unwrap();
    assert_eq!(r.map(|x| x as i64), BERNOULLI8);

    let mut g = gen();
    let m = multinomial(&mut g, &[0.1f32, 0.2, 0.3, 0.4], 4, 6, true).unwrap();
    assert_eq!(m, MULTINOMIAL6);
    let mut g = gen();
    let m = multinomial(&mut g, &[0.1f32, 0.2, 0.3, 0.4], 4, 3, false).unwrap();
    assert_eq!(m, MULTINOMIAL3_NO_REPLACEMENT);

    let mut g = gen();
    let mut r = [0.0f64; 2];
    exponential_(&mut g, &mut r, 1.0).unwrap();
    assert_eq!(bits_of(&r), EXPONENTIAL2_F64);

    // A fresh torch.Generator().
    assert_eq!(CpuGenerator::default().initial_seed(), DEFAULT_SEED);
    let mut g = CpuGenerator::default();
    let mut r = [0.0f32; 2];
    uniform_(&mut g, &mut r, 0.0, 1.0).unwrap();
    assert_eq!(bits_of(&r), DEFAULT_GENERATOR_RAND2);
}

/// The state layout: sizes, where the seed and counters live, and that set_state accepts
/// exactly what get_state produces.
#[test]
fn state_layout() {
    let mut g = CpuGenerator::new(42);
    for _ in 0..8 {
        g.random();
    }
    let s = g.get_state();
    assert_eq!(s.len(), STATE_SIZE);
    assert_eq!(&s[..8], &42u64.to_le_bytes());
    assert_eq!(&s[8..12], &617i32.to_le_bytes()); // left
    assert_eq!(&s[12..16], &1i32.to_le_bytes()); // seeded
    assert_eq!(&s[16..24], &8u64.to_le_bytes()); // next
    assert_eq!(&s[24..32], &0x2b26_e943u64.to_le_bytes()); // recorded: first state word
    let mut h = CpuGenerator::new(0);
    h.set_state(&s).unwrap();
    assert_eq!(h, g);

    // The legacy layout keeps no float sample and rebuilds the double one.
    let mut legacy = s[..LEGACY_STATE_SIZE].to_vec();
    legacy[5016..5024].copy_from_slice(&0.25f64.to_le_bytes()); // normal_x
    legacy[5032..5040].copy_from_slice(&2.0f64.to_le_bytes()); // normal_rho
    legacy[5040..5044].copy_from_slice(&1i32.to_le_bytes()); // normal_is_valid
    h.set_state(&legacy).unwrap();
    assert_eq!(
        h.next_double_normal_sample(),
        Some(2.0 * (std::f64::consts::FRAC_PI_2).sin())
    );
    assert_eq!(h.next_float_normal_sample(), None);

    // Refused: wrong size, unseeded, left out of range, next past the end.
    assert!(h.set_state(&s[..100]).is_err());
    let mut bad = s.clone();
    bad[12..16].copy_from_slice(&0i32.to_le_bytes());
    assert!(h.set_state(&bad).is_err());
    let mut bad = s.clone();
    bad[8..12].copy_from_slice(&625i32.to_le_bytes());
    assert!(h.set_state(&bad).is_err());
    let mut bad = s.clone();
    bad[16..24].copy_from_slice(&624u64.to_le_bytes());
    assert!(h.set_state(&bad).is_err());
    // A refused state leaves the generator as it was.
    assert_eq!(h.next_float_normal_sample(), None);

    // manual_seed drops the cached samples.
    let mut g = CpuGenerator::new(1);
    g.set_next_float_normal_sample(Some(1.5));
    g.set_next_double_normal_sample(Some(2.5));
    g.manual_seed(1);
    assert_eq!(g, CpuGenerator::new(1));
    let mut g = CpuGenerator::new(1);
    let seed = g.seed();
    assert_eq!(g.initial_seed(), seed);
}

#[test]
fn invalid_arguments_are_errors() {
    let mut g = CpuGenerator::new(0);
    let mut x = [0i64; 3];
    let e = randint(&mut g, &mut x, 5, 5).unwrap_err().to_string();
    assert!(e.contains("random_") && e.contains("from=5 >= to=5"), "{e}");
    let mut f = [0.0f32; 3];
    assert!(uniform_(&mut g, &mut f, 1.0, 0.0).is_err());
    assert!(uniform_(&mut g, &mut f, f64::NAN, 1.0).is_err());
    assert!(normal_(&mut g, &mut f, 0.0, f64::NAN).is_err());
    assert!(normal_(&mut g, &mut x, 0.0, 1.0).is_err());
    assert!(exponential_(&mut g, &mut f, 0.0).is_err());
    assert!(bernoulli_scalar_(&mut g, &mut f, f64::NAN).is_err());
    assert!(bernoulli_tensor_(&mut g, &mut f, &[0.5f32; 2]).is_err());
    assert!(bernoulli_tensor_(&mut g, &mut f, &[0i64; 3]).is_err());
    assert!(multinomial(&mut g, &[1.0f32; 6], 4, 1, true).is_err());
    assert!(multinomial(&mut g, &[1.0f32; 4], 0, 1, true).is_err());
    assert!(multinomial(&mut g, &[f32::NAN, 1.0], 2, 2, true).is_err());
    assert!(multinomial(&mut g, &[f32::INFINITY, 1.0], 2, 1, false).is_err());
    assert!(randperm(&mut g, &mut [false; 2]).is_err());
    // Nothing above drew from the stream.
    assert_eq!(g, CpuGenerator::new(0));
}

// Recorded from torch 2.15.0 on x86-64 (AVX512 machine; randn of 16+ float32 elements uses
// the AVX2 kernel there).
const RAND3_F32: [u64; 3] = [0x3f61_dc66, 0x3f6a_3db3, 0x3ec4_06b8];
const RANDN3_F32: [u64; 3] = [0x3eac_62ae, 0x3e03_e69d, 0x3e70_16e7];
const RANDN17_F32_HEAD: [u64; 4] = [0x3ff6_a529, 0xbe23_6d85, 0xbefe_aae4, 0x3ee1_11d8];
const RANDN17_F32_TAIL: [u64; 4] = [0x3d2b_0c00, 0xbe80_ce7a, 0x3f5c_1fb0, 0xbe9e_9482];
const RANDN16_F64_HEAD: [u64; 2] = [0x3fd3_2bee_22cc_b503, 0x3fcf_063c_4666_8b78];
const RANDINT6: [i64; 6] = [42, 67, 76, 14, 26, 35];
const RANDINT_WIDE3: [i64; 3] = [441_507_790_259, 395_924_837_646, 458_615_280_711];
const RANDPERM8: [i64; 8] = [6, 3, 0, 7, 2, 1, 4, 5];
const BERNOULLI8: [i64; 8] = [1, 1, 1, 1, 0, 1, 0, 0];
const MULTINOMIAL6: [i64; 6] = [0, 0, 1, 0, 2, 2];
const MULTINOMIAL3_NO_REPLACEMENT: [i64; 3] = [3, 1, 2];
const EXPONENTIAL2_F64: [u64; 2] = [0x3fae_ad0c_c3ed_94d3, 0x3fb0_a246_8c30_32b6];
const DEFAULT_GENERATOR_RAND2: [u64; 2] = [0x3e88_daec, 0x3f5f_5e04];

/// randperm's large-n path (inside-out shuffle with 64-bit draws, from `u32::MAX / 20`
/// elements up) against upstream, through a few values and a checksum. Needs about 2 GB
/// and some seconds, so it only runs when asked for (`cargo test -- --ignored`).
#[test]
#[ignore]
fn randperm_large_n_matches_upstream() {
    let Some(python) = torchnative_testing::oracle_python() else {
        return;
    };
    let n = (u32::MAX / 20) as usize + 3;
    let script = format!(
        "import torch\n\
         torch.manual_seed(9)\n\
         p = torch.randperm({n}, dtype=torch.int32).long()\n\
         s = (p * torch.arange({n})).sum().item()\n\
         print(p[:4].tolist(), p[-4:].tolist(), s & 0xffffffffffffffff, torch.randint(0, 100, (3,)).tolist())\n"
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(&script)
        .output()
        .expect("cannot start the oracle python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let mut gen = CpuGenerator::new(9);
    let mut p = vec![0i32; n];
    randperm(&mut gen, &mut p).unwrap();
    let sum = p.iter().enumerate().fold(0u64, |acc, (k, &v)| {
        acc.wrapping_add((v as u64).wrapping_mul(k as u64))
    });
    let mut next = [0i64; 3];
    randint(&mut gen, &mut next, 0, 100).unwrap();
    let ours = format!("{:?} {:?} {sum} {:?}", &p[..4], &p[n - 4..], next);
    assert_eq!(ours, theirs);
}
