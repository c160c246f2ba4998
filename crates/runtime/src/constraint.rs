//! Constrained generation: a grammar (GBNF, JSON schema, regular expression, JSON mode)
//! compiled once against a model's vocabulary, applied as a mask on every step's logits
//! before any sampler, greedy included (see `torchnative_constrain`).

use std::sync::Arc;

pub use torchnative_constrain::OrderedJson;
use torchnative_constrain::{CompiledGrammar, Grammar, Matcher, TokenVocabulary};

use crate::error::{invalid, Result};
use crate::llm::Llm;

/// A grammar compiled for one model's vocabulary; cheap to clone and share between requests.
/// Two constraints are equal when they are the same compiled grammar.
#[derive(Clone)]
pub struct Constraint {
    grammar: Arc<CompiledGrammar>,
    /// What it was made from, for messages.
    source: Arc<str>,
}

impl PartialEq for Constraint {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.grammar, &other.grammar)
    }
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Constraint({})", self.source)
    }
}

/// The kinds of text a constraint can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstraintSyntax {
    /// llama.cpp's GBNF.
    Gbnf,
    /// A JSON schema (the subset OpenAI's structured outputs accept).
    JsonSchema,
    /// A regular expression, matched in full.
    Regex,
    /// Any JSON object (JSON mode); the text is ignored.
    JsonObject,
}

impl Constraint {
    /// Compile `grammar` for `llm`'s vocabulary.
    pub fn compile(llm: &Llm, grammar: &Grammar, source: &str) -> Result<Constraint> {
        let vocab = llm.token_vocabulary()?;
        let grammar = CompiledGrammar::new(grammar, vocab)
            .map_err(|e| invalid(format!("grammar ({source})"), e.to_string()))?;
        Ok(Constraint {
            grammar: Arc::new(grammar),
            source: source.into(),
        })
    }

    /// Parse `text` as `syntax` and compile it; errors name the syntax and the place.
    pub fn parse(llm: &Llm, syntax: ConstraintSyntax, text: &str) -> Result<Constraint> {
        let (what, grammar) = match syntax {
            ConstraintSyntax::Gbnf => ("GBNF grammar", Grammar::from_gbnf(text)),
            ConstraintSyntax::JsonSchema => ("JSON schema", Grammar::from_json_schema_str(text)),
            ConstraintSyntax::Regex => ("regular expression", Grammar::from_regex(text)),
            ConstraintSyntax::JsonObject => ("JSON object", Ok(Grammar::json_object())),
        };
        // The parser's message names the syntax and the place.
        let grammar = grammar.map_err(|e| invalid("constraint", e.to_string()))?;
        Constraint::compile(llm, &grammar, what)
    }

    /// Any JSON object (OpenAI's JSON mode).
    pub fn json_object(llm: &Llm) -> Result<Constraint> {
        Constraint::compile(llm, &Grammar::json_object(), "JSON object")
    }

    /// OpenAI's `response_format` value: `None` for `{"type": "text"}`.
    pub fn from_response_format(
        llm: &Llm,
        format: &serde_json::Value,
    ) -> Result<Option<Constraint>> {
        let grammar = Grammar::from_response_format(format)
            .map_err(|e| invalid("response_format", e.to_string()))?;
        grammar
            .map(|g| Constraint::compile(llm, &g, "response_format"))
            .transpose()
    }

    /// [`Constraint::from_response_format`] keeping the schema's property order (a request
    /// body parsed into [`OrderedJson`]).
    pub fn from_response_format_ordered(
        llm: &Llm,
        format: &OrderedJson,
    ) -> Result<Option<Constraint>> {
        let grammar = Grammar::from_response_format_ordered(format)
            .map_err(|e| invalid("response_format", e.to_string()))?;
        grammar
            .map(|g| Constraint::compile(llm, &g, "response_format"))
            .transpose()
    }

    pub(crate) fn matcher(&self) -> Matcher {
        Matcher::new(self.grammar.clone())
    }

    pub(crate) fn mask_words(&self) -> usize {
        self.grammar.vocabulary().mask_words()
    }
}

/// Every token's bytes (`None` for special tokens, which a grammar never produces) and the
/// model's EOS ids.
pub(crate) fn build_vocabulary(llm: &Llm) -> Result<TokenVocabulary> {
    let tok = llm.tokenizer();
    let n = llm.config().vocab_size;
    let mut tokens = Vec::with_capacity(n);
    for id in 0..n as u32 {
        // Rows of the model's output beyond the tokenizer's vocabulary (padding) never decode.
        if id as usize >= tok.vocab_size() {
            tokens.push(None);
            continue;
        }
        let bytes = tok
            .token_bytes(id)
            .map_err(|e| invalid("constrained decoding", e.to_string()))?;
        tokens.push(bytes.map(<[u8]>::to_vec));
    }
    TokenVocabulary::new(tokens, llm.eos_token_ids())
        .map_err(|e| invalid("constrained decoding vocabulary", e.to_string()))
}

/// One sequence's grammar state inside a token loop.
pub(crate) struct ConstraintState {
    matcher: Matcher,
    mask: Vec<u64>,
}

impl ConstraintState {
    pub(crate) fn new(c: &Constraint) -> ConstraintState {
        ConstraintState {
            matcher: c.matcher(),
            mask: vec![0; c.mask_words()],
        }
    }

    /// Disallowed tokens' logits to -inf (EOS only where the grammar may end).
    pub(crate) fn mask(&mut self, logits: &mut [f32]) {
        self.matcher.fill_mask(&mut self.mask);
        Matcher::apply_mask(&self.mask, logits);
    }

    /// Advance over a sampled token; true when the grammar cannot continue after it.
    pub(crate) fn accept(&mut self, token: u32) -> Result<bool> {
        self.matcher
            .accept_token(token)
            .map_err(|e| invalid("constrained decoding", e.to_string()))?;
        Ok(!self.matcher.can_continue())
    }
}
