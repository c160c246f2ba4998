//! Speculative decoding: draft several tokens cheaply, verify them in one batched forward pass
//! of the target model.
//!
//! Verification samples each position with the request's own [`TokenLoop`] (same sampler
//! chain, same random stream) from the target's logits, and keeps a drafted token only when
//! the sampled token equals it. Because the kernels are batch invariant, the target's logits
//! for a position are the same bits whether it was verified in a batch of k + 1 or decoded
//! alone, so the output is the plain decoding's output, token for token, for greedy and seeded
//! sampling alike. Both drafters here are deterministic (a one-hot draft distribution q), and
//! for one-hot q this acceptance rule is Leviathan et al.'s rejection sampling: a draft `d` is
//! accepted with probability p(d), and on rejection the token is drawn from p restricted to
//! tokens other than `d` (the normalised max(p - q, 0)), so the output follows the target
//! distribution exactly.
//!
//! Drafters: prompt lookup (the tokens that followed the last earlier occurrence of the
//! history's final n-gram, no model needed) and a smaller draft model of the same vocabulary
//! decoding greedily in its own session.

use torchnative_core::kernels;

use crate::error::{invalid, Result};
use crate::llm::{Llm, Session, SessionOptions};

/// Where drafts come from.
#[derive(Clone)]
pub enum DraftSource {
    /// The continuation of the last earlier occurrence of the history's final n-gram, for n
    /// from `max_ngram` down to `min_ngram` (prompt lookup decoding).
    PromptLookup { min_ngram: usize, max_ngram: usize },
    /// A draft model with the target's vocabulary, decoding greedily.
    Model(Llm),
}

impl std::fmt::Debug for DraftSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DraftSource::PromptLookup {
                min_ngram,
                max_ngram,
            } => write!(f, "PromptLookup({min_ngram}..={max_ngram})"),
            DraftSource::Model(m) => write!(f, "Model({})", m.source().display()),
        }
    }
}

/// How to speculate.
#[derive(Clone, Debug)]
pub struct SpeculativeConfig {
    pub draft: DraftSource,
    /// Tokens drafted (and verified in one forward pass) per step, at most.
    pub max_draft_tokens: usize,
}

impl SpeculativeConfig {
    /// Prompt lookup with n-grams of 1 to 3 tokens and up to `max_draft_tokens` drafted.
    pub fn prompt_lookup(max_draft_tokens: usize) -> SpeculativeConfig {
        SpeculativeConfig {
            draft: DraftSource::PromptLookup {
                min_ngram: 1,
                max_ngram: 3,
            },
            max_draft_tokens,
        }
    }
}

/// Most tokens drafted per step: verification rows are a workspace allocated per generation.
pub const MAX_DRAFT_TOKENS: usize = 32;

/// Counts of one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeculativeStats {
    /// Tokens proposed by the drafter and verified.
    pub drafted: usize,
    /// Of those, tokens the target kept.
    pub accepted: usize,
    /// Verification forward passes (each of 1 + drafted tokens).
    pub verify_steps: usize,
}

impl SpeculativeStats {
    pub fn acceptance_rate(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }
}

/// A drafter bound to a target model (its own session for a draft model).
pub struct Speculator {
    config: SpeculativeConfig,
    draft: Option<Session>,
}

impl Speculator {
    /// Check `config` against the target before any work: draft length, n-gram bounds, and a
    /// draft model's vocabulary.
    pub fn new(target: &Llm, config: SpeculativeConfig) -> Result<Speculator> {
        let k = config.max_draft_tokens;
        if !(1..=MAX_DRAFT_TOKENS).contains(&k) {
            return Err(invalid(
                "max_draft_tokens",
                format!("{k} (must be 1 to {MAX_DRAFT_TOKENS})"),
            ));
        }
        let draft = match &config.draft {
            DraftSource::PromptLookup {
                min_ngram,
                max_ngram,
            } => {
                if *min_ngram == 0 || min_ngram > max_ngram || *max_ngram > 64 {
                    return Err(invalid(
                        "prompt lookup n-gram sizes",
                        format!("{min_ngram}..={max_ngram} (need 1 <= min <= max <= 64)"),
                    ));
                }
                None
            }
            DraftSource::Model(m) => {
                let (tv, dv) = (target.config().vocab_size, m.config().vocab_size);
                if tv != dv {
                    return Err(invalid(
                        "draft model",
                        format!(
                            "{} has a vocabulary of {dv} tokens, the target {} has {tv}",
                            m.source().display(),
                            target.source().display()
                        ),
                    ));
                }
                if m.tokenizer().token_to_piece(0).ok() != target.tokenizer().token_to_piece(0).ok()
                    || m.eos_token_ids() != target.eos_token_ids()
                {
                    return Err(invalid(
                        "draft model",
                        format!(
                            "{} does not share the target's tokenizer (special tokens differ)",
                            m.source().display()
                        ),
                    ));
                }
                let n_ctx = m
                    .config()
                    .context_length
                    .min(target.config().context_length)
                    .min(4096);
                Some(Session::new(
                    m.clone(),
                    SessionOptions {
                        n_ctx: Some(n_ctx),
                        ..Default::default()
                    },
                )?)
            }
        };
        Ok(Speculator { config, draft })
    }

    pub fn config(&self) -> &SpeculativeConfig {
        &self.config
    }

    /// Up to `max` tokens that may follow `history` (written to `out`, cleared first).
    pub(crate) fn propose(
        &mut self,
        history: &[u32],
        max: usize,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        out.clear();
        let max = max.min(self.config.max_draft_tokens);
        if max == 0 {
            return Ok(());
        }
        match (&self.config.draft, &mut self.draft) {
            (
                DraftSource::PromptLookup {
                    min_ngram,
                    max_ngram,
                },
                _,
            ) => prompt_lookup(history, *min_ngram, *max_ngram, max, out),
            (DraftSource::Model(_), Some(session)) => {
                // Room in the draft's own cache: it holds the history and max - 1 drafts.
                if history.len() + max > session.capacity() {
                    return Ok(());
                }
                let vocab = session.llm().config().vocab_size;
                session.sync_to(history)?;
                let mut best = argmax(&session.last_logits()[..vocab]);
                out.push(best);
                while out.len() < max {
                    best = argmax(&session.decode_logits(best)?[..vocab]);
                    out.push(best);
                }
            }
            (DraftSource::Model(_), None) => unreachable!("a draft model has its session"),
        }
        Ok(())
    }
}

fn argmax(row: &[f32]) -> u32 {
    kernels::argmax_f32(row).unwrap_or(0) as u32
}

/// The tokens after the last earlier occurrence of `history`'s final n-gram (longest n
/// first), at most `max` of them, in `out` (cleared first).
pub(crate) fn prompt_lookup(
    history: &[u32],
    min_n: usize,
    max_n: usize,
    max: usize,
    out: &mut Vec<u32>,
) {
    out.clear();
    let len = history.len();
    for n in (min_n..=max_n.min(len.saturating_sub(1))).rev() {
        let suffix = &history[len - n..];
        // Latest match first: recent text predicts best.
        if let Some(i) = (0..len - n).rev().find(|&i| &history[i..i + n] == suffix) {
            let from = i + n;
            out.extend_from_slice(&history[from..(from + max).min(len)]);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lookup_continues_the_latest_longest_match() {
        let mut out = Vec::new();
        // "1 2 3 4 5 ... 1 2 3" -> "4 5 9" (the 3-gram's continuation).
        prompt_lookup(&[1, 2, 3, 4, 5, 9, 7, 1, 2, 3], 1, 3, 3, &mut out);
        assert_eq!(out, [4, 5, 9]);
        // The latest occurrence wins.
        prompt_lookup(&[7, 1, 8, 7, 2, 6, 7], 1, 2, 1, &mut out);
        assert_eq!(out, [2]);
        // Shorter n-grams when the longer ones never occurred; the continuation stops at
        // the end of the history.
        prompt_lookup(&[5, 6, 1, 9, 6], 1, 3, 4, &mut out);
        assert_eq!(out, [1, 9, 6]);
        prompt_lookup(&[1, 2, 3], 1, 3, 4, &mut out);
        assert!(out.is_empty());
        prompt_lookup(&[4], 1, 3, 4, &mut out);
        assert!(out.is_empty());
    }
}
