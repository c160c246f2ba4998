//! GBNF: parsing, errors, print round trips, and grammars in the style of llama.cpp's examples.
mod common;

use common::{check, gbnf};
use torchnative_constrain::{Error, Grammar};

fn err(text: &str) -> String {
    match Grammar::from_gbnf(text) {
        Ok(_) => panic!("should fail: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_the_place_and_reason() {
    let e = err("root ::= foo\n");
    assert!(
        e.contains("undefined rule 'foo'") && e.contains("line 1 column 10"),
        "{e}"
    );
    let e = err("\n\nitem ::= \"a\"\n");
    assert!(e.contains("no 'root' rule"), "{e}");
    assert!(err("").contains("no rules"));
    assert!(err("# only a comment\n").contains("no rules"));
    let e = err("root ::= \"abc\n");
    assert!(
        e.contains("unterminated string literal") && e.contains("line 1 column 10"),
        "{e}"
    );
    let e = err("root ::= [a-z\n");
    assert!(e.contains("unterminated character class"), "{e}");
    let e = err("root ::= ( \"a\" \n");
    assert!(e.contains("expected ')'"), "{e}");
    assert!(err("root ::= * \"a\"").contains("nothing before it"));
    assert!(err("root ::= \"a\"{3,1}").contains("below the minimum"));
    assert!(err("root ::= \"a\"{99999}").contains("above the limit"));
    assert!(err("root ::= \"\\q\"").contains("unknown escape '\\q'"));
    assert!(err("root ::= \"\\x4\"").contains("needs 2 hex digits"));
    assert!(err("root ::= \"\\uD800\"").contains("not a Unicode scalar value"));
    assert!(err("root ::= [z-a]").contains("reversed"));
    assert!(err("root ::= <think>").contains("token references"));
    assert!(err("root ::= \"a\"\nroot ::= \"b\"").contains("defined twice"));
    assert!(err("root = \"a\"").contains("expected '::='"));
    assert!(err("root ::= \"a\" )").contains("unexpected ')'"));
    let e = err("root ::= \"a\"\n  x ::= y ::= z");
    assert!(e.starts_with("GBNF grammar, line 2"), "{e}");
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(500), ")".repeat(500));
    assert!(err(&deep).contains("nest deeper"));
}

#[test]
fn compile_errors_name_the_rule() {
    let left = Grammar::from_gbnf("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]")
        .unwrap();
    let e =
        torchnative_constrain::CompiledGrammar::new(&left, common::synthetic_vocab(1)).unwrap_err();
    assert!(matches!(e, Error::Grammar(_)));
    assert!(
        e.to_string().contains("left recursion") && e.to_string().contains("'expr'"),
        "{e}"
    );
    // Hidden left recursion through a nullable prefix.
    let hidden = Grammar::from_gbnf("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= \"z\"?").unwrap();
    let e = torchnative_constrain::CompiledGrammar::new(&hidden, common::synthetic_vocab(1))
        .unwrap_err();
    assert!(e.to_string().contains("left recursion"), "{e}");
    let nothing = Grammar::from_gbnf(
        "root ::= [^\\x00-\\U0010FFFF] | root2\nroot2 ::= root2 \"a\" \"b\" | [^\\x00-\\U0010FFFF]",
    )
    .unwrap();
    let e = torchnative_constrain::CompiledGrammar::new(&nothing, common::synthetic_vocab(1))
        .unwrap_err();
    assert!(e.to_string().contains("matches nothing"), "{e}");
}

#[test]
fn print_parses_back_to_the_same_rules() {
    let texts = [
        ARITHMETIC,
        JSON,
        LIST,
        CHESS,
        "root ::= [^\"\\\\] . [a-zA-Z_\\-] \"\\n\\t\\x7f\\u00e9\\U0001F600\" [\\u4e00-\\u9fff]{2,4}",
        "root ::= (\"a\" | \"b\"?)+ x{3} x{1,} x{0,2}\nx ::= \"x\"",
    ];
    for text in texts {
        let g = Grammar::from_gbnf(text).unwrap();
        let printed = g.to_string();
        let again = Grammar::from_gbnf(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        let mut a: Vec<_> = printed.lines().map(String::from).collect();
        let mut b: Vec<_> = again.to_string().lines().map(String::from).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{printed}");
        assert_eq!(again.rules().len(), g.rules().len());
    }
}

const ARITHMETIC: &str = r#"
# Arithmetic expressions, right-recursive (no left recursion)
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"#;

const JSON: &str = r#"
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"#;

const LIST: &str = r#"
root ::= item+
# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
"#;

const CHESS: &str = r#"
root   ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move   ::= (pawn | nonpawn | castle) [+#]?
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
nonpawn ::= [NBKRQ] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" "-O"?
"#;

#[test]
fn arithmetic() {
    check(
        &gbnf(ARITHMETIC),
        &["1+2= 3\n", "(a+b)*c = x1\n", "x = y\nz= 2\n", "( 1 ) = 1\n"],
        &["", "1+2=3", "+1=2\n", "1++2=3\n", "A=1\n", "(1=1\n"],
    );
}

#[test]
fn json_style() {
    check(
        &gbnf(JSON),
        &[
            "{}",
            "{\"a\": 1}",
            "{\"a\": [1, 2.5e+3, \"x\\n\\u00e9\"], \"b\": {\"c\": null}} ",
            "{\n  \"key\": true,\n  \"é中\": false\n}",
        ],
        &[
            "[]",
            "{",
            "{\"a\" 1}",
            "{\"a\": tru}",
            "{\"a\": \"\\x\"}",
            "{'a': 1}",
            "{\"a\": 01}x",
        ],
    );
}

#[test]
fn list() {
    check(
        &gbnf(LIST),
        &["- milk\n", "- eggs\n- café crème\n"],
        &["", "- \n", "-milk\n", "- milk", "- a\u{2028}b\n"],
    );
}

#[test]
fn chess() {
    check(
        &gbnf(CHESS),
        &["1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n12. O-O-O Qxd8+\n"],
        &["1. e4\n", "1. e9 e5\n2. a a\n", "1. e4 e5\n"],
    );
}

#[test]
fn unicode_classes_and_split_characters() {
    let c = gbnf("root ::= [α-ω]+ \"-\" [^a-z]{2} .");
    check(&c, &["αβγ-ÉÜx", "ω-12😀"], &["αβγ-ab1", "a-12x", "α-1x"]);
    // A token carrying half of a two-byte character, then one carrying the other half.
    let c = gbnf("root ::= \"a\" [é] \"b\"");
    let vocab = c.vocabulary().clone();
    let first = (0..vocab.len() as u32)
        .find(|&t| vocab.token_bytes(t) == Some(&[b'a', 0xC3][..]))
        .unwrap();
    let second = (0..vocab.len() as u32)
        .find(|&t| vocab.token_bytes(t) == Some(&[0xA9, b'b'][..]))
        .unwrap();
    let mut m = torchnative_constrain::Matcher::new(c);
    assert!(m.allowed_tokens().contains(&first));
    m.accept_token(first).unwrap();
    let allowed = m.allowed_tokens();
    assert!(allowed.contains(&second));
    assert!(
        allowed
            .iter()
            .all(|&t| vocab.token_bytes(t).unwrap()[0] == 0xA9),
        "{allowed:?}"
    );
    m.accept_token(second).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn ambiguity_stays_small() {
    // Every way of splitting a run of 'a's: exponential parses, a handful of stacks.
    let c = gbnf("root ::= (\"a\" | \"aa\" | \"a\" \"a\")* \"b\"");
    let text = "a".repeat(200) + "b";
    assert!(common::matches(&c, &text));
}
