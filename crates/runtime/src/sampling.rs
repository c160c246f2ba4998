//! The sampler chain: each sampler is a small type that narrows or reshapes the candidate set;
//! a chain runs them in order and the last one selects a token (as in llama.cpp's
//! `llama_sampler_chain`). Greedy decoding is a chain too.
//!
//! Default order (llama.cpp's): penalties -> top-k -> typical -> top-p -> min-p -> temperature ->
//! draw. Semantics per sampler follow transformers' logits processors of the same name.

use crate::error::{invalid, Result};
use crate::rng::Rng;

/// One candidate token and its (possibly modified) logit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenLogit {
    pub id: u32,
    pub logit: f32,
}

/// The working set a chain narrows. Reused across steps so sampling allocates nothing.
#[derive(Default, Debug)]
pub struct Candidates {
    items: Vec<TokenLogit>,
    /// True when `items` is sorted by logit, highest first (ties by id).
    sorted: bool,
    /// Softmax of the current logits, filled on demand in `items` order.
    probs: Vec<f32>,
    selected: Option<u32>,
    /// Scratch of the samplers (token ids, typical-p order, kept candidates), kept between steps
    /// so that a reserved chain samples without allocating.
    scratch_ids: Vec<u32>,
    scratch_order: Vec<(f64, usize)>,
    spare: Vec<TokenLogit>,
}

impl Candidates {
    /// Size every buffer for a vocabulary of `vocab` tokens and a history of up to `history`
    /// tokens, so that sampling then allocates nothing.
    pub fn reserve(&mut self, vocab: usize, history: usize) {
        self.items.reserve(vocab);
        self.probs.reserve(vocab);
        self.scratch_order.reserve(vocab);
        self.spare.reserve(vocab);
        self.scratch_ids.reserve(history);
    }

    /// Refill from a full logit row (token id = index).
    pub fn reset(&mut self, logits: &[f32]) {
        self.items.clear();
        self.items
            .extend(logits.iter().enumerate().map(|(i, &logit)| TokenLogit {
                id: i as u32,
                logit,
            }));
        self.sorted = false;
        self.selected = None;
    }

    pub fn items(&self) -> &[TokenLogit] {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn selected(&self) -> Option<u32> {
        self.selected
    }

    fn sort_desc(&mut self) {
        if !self.sorted {
            self.items
                .sort_unstable_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
            self.sorted = true;
        }
    }

    /// Keep the `n` best candidates (sorting first).
    fn truncate_sorted(&mut self, n: usize) {
        self.sort_desc();
        self.items.truncate(n.max(1));
    }

    /// Softmax over the current logits into `self.probs` (max-subtracted, in f64 for the sum).
    fn compute_probs(&mut self) {
        let max = self
            .items
            .iter()
            .map(|t| t.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        self.probs.clear();
        if max == f32::NEG_INFINITY {
            // Everything masked: no distribution exists; leave probs all zero.
            self.probs.resize(self.items.len(), 0.0);
            return;
        }
        let mut sum = 0.0f64;
        for t in &self.items {
            let e = ((t.logit - max) as f64).exp();
            sum += e;
            self.probs.push(e as f32);
        }
        let inv = (1.0 / sum) as f32;
        for p in &mut self.probs {
            *p *= inv;
        }
    }

    fn logit_mut(&mut self, id: u32) -> Option<&mut f32> {
        // A set that was never narrowed is indexed by id; otherwise search.
        let direct = matches!(self.items.get(id as usize), Some(t) if t.id == id);
        let index = if direct {
            Some(id as usize)
        } else {
            self.items.iter().position(|t| t.id == id)
        };
        index.map(move |i| &mut self.items[i].logit)
    }
}

/// What a sampler may look at besides the candidates.
pub struct SamplingContext<'a> {
    /// Prompt and generated tokens so far, in order.
    pub history: &'a [u32],
    /// How many of `history` are prompt tokens.
    pub n_prompt: usize,
    pub rng: &'a mut Rng,
}

/// One step of a chain.
pub trait Sampler: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn apply(&self, cands: &mut Candidates, ctx: &mut SamplingContext<'_>);
}

/// transformers' `RepetitionPenaltyLogitsProcessor`: every token seen in prompt or output has a
/// positive logit divided by `penalty`, a negative one multiplied by it.
#[derive(Debug, Clone)]
pub struct RepetitionPenalty(pub f32);

/// OpenAI-style penalties over the generated tokens: `logit -= presence * [count > 0] +
/// frequency * count`.
#[derive(Debug, Clone)]
pub struct PresenceFrequencyPenalty {
    pub presence: f32,
    pub frequency: f32,
}

/// Adds a fixed bias to chosen tokens' logits (`-inf` bans a token).
#[derive(Debug, Clone)]
pub struct LogitBias(pub Vec<(u32, f32)>);

/// Keep the `k` most likely tokens.
#[derive(Debug, Clone)]
pub struct TopK(pub usize);

/// transformers' `TypicalLogitsWarper` (locally typical sampling).
#[derive(Debug, Clone)]
pub struct TypicalP(pub f32);

/// Nucleus sampling: the smallest set of most likely tokens whose mass reaches `p`.
#[derive(Debug, Clone)]
pub struct TopP(pub f32);

/// Keep tokens whose probability is at least `p` times the most likely one's.
#[derive(Debug, Clone)]
pub struct MinP(pub f32);

/// Divide logits by the temperature.
#[derive(Debug, Clone)]
pub struct Temperature(pub f32);

/// Select the most likely token (ties: the lowest id, like `argmax`).
#[derive(Debug, Clone)]
pub struct Greedy;

/// Draw from the softmax of the remaining candidates with the context's RNG.
#[derive(Debug, Clone)]
pub struct Draw;

impl Sampler for RepetitionPenalty {
    fn name(&self) -> &'static str {
        "repetition_penalty"
    }
    fn apply(&self, cands: &mut Candidates, ctx: &mut SamplingContext<'_>) {
        if self.0 == 1.0 {
            return;
        }
        let mut seen = std::mem::take(&mut cands.scratch_ids);
        seen.clear();
        seen.extend_from_slice(ctx.history);
        seen.sort_unstable();
        seen.dedup();
        for &id in &seen {
            if let Some(l) = cands.logit_mut(id) {
                *l = if *l > 0.0 { *l / self.0 } else { *l * self.0 };
            }
        }
        cands.scratch_ids = seen;
        cands.sorted = false;
    }
}

impl Sampler for PresenceFrequencyPenalty {
    fn name(&self) -> &'static str {
        "presence_frequency_penalty"
    }
    fn apply(&self, cands: &mut Candidates, ctx: &mut SamplingContext<'_>) {
        if self.presence == 0.0 && self.frequency == 0.0 {
            return;
        }
        let mut generated = std::mem::take(&mut cands.scratch_ids);
        generated.clear();
        generated.extend_from_slice(&ctx.history[ctx.n_prompt.min(ctx.history.len())..]);
        generated.sort_unstable();
        for run in generated.chunk_by(|a, b| a == b) {
            if let Some(l) = cands.logit_mut(run[0]) {
                *l -= self.presence + self.frequency * run.len() as f32;
            }
        }
        cands.scratch_ids = generated;
        cands.sorted = false;
    }
}

impl Sampler for LogitBias {
    fn name(&self) -> &'static str {
        "logit_bias"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        for &(id, bias) in &self.0 {
            if let Some(l) = cands.logit_mut(id) {
                *l += bias;
            }
        }
        cands.sorted = false;
    }
}

impl Sampler for TopK {
    fn name(&self) -> &'static str {
        "top_k"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        if self.0 == 0 || self.0 >= cands.len() {
            return;
        }
        if !cands.sorted {
            // Partial selection first: sorting 49k logits for k = 40 is wasted work.
            let k = self.0;
            cands.items.select_nth_unstable_by(k - 1, |a, b| {
                b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
            });
            cands.items.truncate(k);
        }
        cands.truncate_sorted(self.0);
    }
}

impl Sampler for TypicalP {
    fn name(&self) -> &'static str {
        "typical_p"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        if self.0 >= 1.0 || cands.len() <= 1 {
            return;
        }
        cands.compute_probs();
        let entropy: f64 = cands
            .probs
            .iter()
            .filter(|&&p| p > 0.0)
            .map(|&p| -(p as f64) * (p as f64).ln())
            .sum();
        // Order by |-log p - H| ascending, keep the prefix whose mass first reaches typical_p.
        let mut order = std::mem::take(&mut cands.scratch_order);
        order.clear();
        order.extend(cands.probs.iter().enumerate().map(|(i, &p)| {
            let surprise = if p > 0.0 {
                -(p as f64).ln()
            } else {
                f64::INFINITY
            };
            ((surprise - entropy).abs(), i)
        }));
        // In place (unstable); ties are ordered by index, so the result equals a stable sort.
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut mass = 0.0f64;
        let mut keep = order.len();
        for (n, &(_, i)) in order.iter().enumerate() {
            mass += cands.probs[i] as f64;
            if mass >= self.0 as f64 {
                keep = n + 1;
                break;
            }
        }
        let mut kept = std::mem::take(&mut cands.spare);
        kept.clear();
        kept.extend(order[..keep].iter().map(|&(_, i)| cands.items[i]));
        kept.sort_unstable_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
        cands.scratch_order = order;
        cands.spare = std::mem::replace(&mut cands.items, kept);
        cands.sorted = true;
    }
}

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        "top_p"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        if self.0 >= 1.0 || cands.len() <= 1 {
            return;
        }
        cands.sort_desc();
        cands.compute_probs();
        let mut mass = 0.0f64;
        let mut keep = cands.len();
        for (i, &p) in cands.probs.iter().enumerate() {
            mass += p as f64;
            if mass >= self.0 as f64 {
                keep = i + 1;
                break;
            }
        }
        cands.truncate_sorted(keep);
    }
}

impl Sampler for MinP {
    fn name(&self) -> &'static str {
        "min_p"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        if self.0 <= 0.0 || cands.len() <= 1 {
            return;
        }
        cands.sort_desc();
        cands.compute_probs();
        let threshold = cands.probs[0] * self.0;
        let keep = cands.probs.iter().take_while(|&&p| p >= threshold).count();
        cands.truncate_sorted(keep);
    }
}

impl Sampler for Temperature {
    fn name(&self) -> &'static str {
        "temperature"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        if self.0 == 1.0 {
            return;
        }
        for t in &mut cands.items {
            t.logit /= self.0;
        }
    }
}

impl Sampler for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }
    fn apply(&self, cands: &mut Candidates, _ctx: &mut SamplingContext<'_>) {
        cands.selected = cands
            .items
            .iter()
            .fold(None::<TokenLogit>, |best, t| match best {
                Some(b) if b.logit > t.logit || (b.logit == t.logit && b.id < t.id) => Some(b),
                _ => Some(*t),
            })
            .map(|t| t.id);
    }
}

impl Sampler for Draw {
    fn name(&self) -> &'static str {
        "draw"
    }
    fn apply(&self, cands: &mut Candidates, ctx: &mut SamplingContext<'_>) {
        cands.compute_probs();
        if cands.probs.iter().all(|&p| p == 0.0) {
            cands.selected = None;
            return;
        }
        let u = ctx.rng.next_f64();
        let mut acc = 0.0f64;
        let mut chosen = None;
        for (t, &p) in cands.items.iter().zip(&cands.probs) {
            if p <= 0.0 {
                continue;
            }
            acc += p as f64;
            chosen = Some(t.id);
            if u < acc {
                break;
            }
        }
        cands.selected = chosen;
    }
}

/// The sampler kinds a chain can be built from, for configurable ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerKind {
    Penalties,
    TopK,
    Typical,
    TopP,
    MinP,
    Temperature,
}

impl SamplerKind {
    /// llama.cpp's default order.
    pub const DEFAULT_ORDER: [SamplerKind; 6] = [
        SamplerKind::Penalties,
        SamplerKind::TopK,
        SamplerKind::Typical,
        SamplerKind::TopP,
        SamplerKind::MinP,
        SamplerKind::Temperature,
    ];
}

/// Parameters a chain is built from; names as in transformers' `GenerationConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub do_sample: bool,
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub typical_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub logit_bias: Vec<(u32, f32)>,
    /// Order of the chain's stages; the final draw (or greedy pick) always comes last.
    pub order: Vec<SamplerKind>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            do_sample: false,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            typical_p: 1.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            order: SamplerKind::DEFAULT_ORDER.to_vec(),
        }
    }
}

impl SamplingParams {
    /// Check every parameter's range; the error names the parameter and its value.
    pub fn validate(&self, vocab_size: usize) -> Result<()> {
        let check = |name: &str, v: f32, ok: bool, range: &str| {
            if ok && v.is_finite() {
                Ok(())
            } else {
                Err(invalid(name, format!("{v} is outside {range}")))
            }
        };
        check(
            "temperature",
            self.temperature,
            self.temperature >= 0.0,
            "[0, inf)",
        )?;
        check(
            "top_p",
            self.top_p,
            self.top_p > 0.0 && self.top_p <= 1.0,
            "(0, 1]",
        )?;
        check(
            "min_p",
            self.min_p,
            (0.0..=1.0).contains(&self.min_p),
            "[0, 1]",
        )?;
        check(
            "typical_p",
            self.typical_p,
            self.typical_p > 0.0 && self.typical_p <= 1.0,
            "(0, 1]",
        )?;
        check(
            "repetition_penalty",
            self.repetition_penalty,
            self.repetition_penalty > 0.0,
            "(0, inf)",
        )?;
        check(
            "presence_penalty",
            self.presence_penalty,
            true,
            "finite values",
        )?;
        check(
            "frequency_penalty",
            self.frequency_penalty,
            true,
            "finite values",
        )?;
        for &(id, bias) in &self.logit_bias {
            if id as usize >= vocab_size {
                return Err(invalid(
                    "logit_bias",
                    format!("token id {id} is out of range for a vocabulary of {vocab_size}"),
                ));
            }
            if bias.is_nan() {
                return Err(invalid("logit_bias", format!("bias for token {id} is NaN")));
            }
        }
        Ok(())
    }

    /// Greedy when sampling is off or the temperature is 0 (as transformers treats them).
    pub fn is_greedy(&self) -> bool {
        !self.do_sample || self.temperature == 0.0
    }
}

/// An ordered list of samplers; the last one selects.
#[derive(Debug)]
pub struct SamplerChain {
    samplers: Vec<Box<dyn Sampler>>,
    cands: Candidates,
}

impl SamplerChain {
    pub fn new(samplers: Vec<Box<dyn Sampler>>) -> SamplerChain {
        SamplerChain {
            samplers,
            cands: Candidates::default(),
        }
    }

    /// The chain for `params`. Penalties apply in greedy mode too, as in transformers.
    pub fn from_params(params: &SamplingParams) -> SamplerChain {
        let mut samplers: Vec<Box<dyn Sampler>> = Vec::new();
        if !params.logit_bias.is_empty() {
            samplers.push(Box::new(LogitBias(params.logit_bias.clone())));
        }
        let greedy = params.is_greedy();
        for kind in &params.order {
            match kind {
                SamplerKind::Penalties => {
                    if params.repetition_penalty != 1.0 {
                        samplers.push(Box::new(RepetitionPenalty(params.repetition_penalty)));
                    }
                    if params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 {
                        samplers.push(Box::new(PresenceFrequencyPenalty {
                            presence: params.presence_penalty,
                            frequency: params.frequency_penalty,
                        }));
                    }
                }
                _ if greedy => {}
                SamplerKind::TopK if params.top_k > 0 => {
                    samplers.push(Box::new(TopK(params.top_k)))
                }
                SamplerKind::Typical if params.typical_p < 1.0 => {
                    samplers.push(Box::new(TypicalP(params.typical_p)))
                }
                SamplerKind::TopP if params.top_p < 1.0 => {
                    samplers.push(Box::new(TopP(params.top_p)))
                }
                SamplerKind::MinP if params.min_p > 0.0 => {
                    samplers.push(Box::new(MinP(params.min_p)))
                }
                SamplerKind::Temperature if params.temperature != 1.0 => {
                    samplers.push(Box::new(Temperature(params.temperature)))
                }
                _ => {}
            }
        }
        if greedy {
            samplers.push(Box::new(Greedy));
        } else {
            samplers.push(Box::new(Draw));
        }
        SamplerChain::new(samplers)
    }

    /// Size the chain's buffers for a vocabulary of `vocab` tokens and a history (prompt plus
    /// generated tokens) of up to `history`: sampling then allocates nothing.
    pub fn reserve(&mut self, vocab: usize, history: usize) {
        self.cands.reserve(vocab, history);
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.samplers.iter().map(|s| s.name()).collect()
    }

    /// Run the chain over one logit row and return the selected token.
    pub fn sample(&mut self, logits: &[f32], ctx: &mut SamplingContext<'_>) -> Result<u32> {
        self.cands.reset(logits);
        for s in &self.samplers {
            s.apply(&mut self.cands, ctx);
        }
        self.cands.selected().ok_or_else(|| {
            invalid(
                "sampler chain",
                "no token could be selected (every candidate's logit is -inf or NaN)",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx<'a>(history: &'a [u32], rng: &'a mut Rng) -> SamplingContext<'a> {
        SamplingContext {
            history,
            n_prompt: 0,
            rng,
        }
    }

    fn ids(c: &Candidates) -> Vec<u32> {
        let mut v: Vec<u32> = c.items().iter().map(|t| t.id).collect();
        v.sort_unstable();
        v
    }

    fn softmax(x: &[f32]) -> Vec<f64> {
        let m = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f64> = x.iter().map(|&v| ((v - m) as f64).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    #[test]
    fn greedy_picks_argmax_lowest_id_on_ties() {
        let mut rng = Rng::seeded(0);
        let mut chain = SamplerChain::from_params(&SamplingParams::default());
        assert_eq!(chain.names(), ["greedy"]);
        assert_eq!(
            chain
                .sample(&[0.1, 3.0, -1.0, 3.0], &mut ctx(&[], &mut rng))
                .unwrap(),
            1
        );
    }

    #[test]
    fn top_k_keeps_k_best() {
        let mut rng = Rng::seeded(0);
        let mut c = Candidates::default();
        c.reset(&[0.5, 2.0, -1.0, 1.5, 0.7]);
        TopK(2).apply(&mut c, &mut ctx(&[], &mut rng));
        assert_eq!(ids(&c), [1, 3]);
    }

    #[test]
    fn top_p_matches_nucleus_definition() {
        // Probabilities of [3, 2, 1, 0] are about [0.644, 0.237, 0.087, 0.032].
        let logits = [1.0, 3.0, 0.0, 2.0];
        let p = softmax(&logits);
        let mut rng = Rng::seeded(0);
        for (top_p, want) in [
            (0.5, vec![1]),
            (0.8, vec![1, 3]),
            (0.9, vec![0, 1, 3]),
            (1.0, vec![0, 1, 2, 3]),
        ] {
            let mut c = Candidates::default();
            c.reset(&logits);
            TopP(top_p).apply(&mut c, &mut ctx(&[], &mut rng));
            assert_eq!(ids(&c), want, "top_p {top_p} with probs {p:?}");
        }
    }

    #[test]
    fn min_p_is_relative_to_the_best() {
        let logits = [0.0, (0.5f32).ln(), (0.09f32).ln(), (0.11f32).ln()];
        let mut rng = Rng::seeded(0);
        let mut c = Candidates::default();
        c.reset(&logits);
        MinP(0.1).apply(&mut c, &mut ctx(&[], &mut rng));
        assert_eq!(ids(&c), [0, 1, 3]);
    }

    #[test]
    fn typical_keeps_tokens_closest_to_entropy() {
        // One likely token over a flat tail: its surprise is far below the entropy, the tail
        // tokens are the typical ones.
        let probs = [0.4f32, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1];
        let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
        let h: f64 = probs.iter().map(|&p| -(p as f64) * (p as f64).ln()).sum();
        let mut dist: Vec<(f64, u32)> = probs
            .iter()
            .enumerate()
            .map(|(i, &p)| ((-(p as f64).ln() - h).abs(), i as u32))
            .collect();
        dist.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut want = Vec::new();
        let mut mass = 0.0;
        for (_, i) in dist {
            want.push(i);
            mass += probs[i as usize] as f64;
            if mass >= 0.5 {
                break;
            }
        }
        want.sort_unstable();
        let mut rng = Rng::seeded(0);
        let mut c = Candidates::default();
        c.reset(&logits);
        TypicalP(0.5).apply(&mut c, &mut ctx(&[], &mut rng));
        assert_eq!(ids(&c), want);
        assert!(
            !want.contains(&0),
            "the over-likely token is not typical here: {want:?}"
        );
    }

    #[test]
    fn repetition_penalty_follows_transformers_sign_rule() {
        let mut rng = Rng::seeded(0);
        let mut c = Candidates::default();
        c.reset(&[2.0, -2.0, 2.0]);
        RepetitionPenalty(2.0).apply(&mut c, &mut ctx(&[0, 1, 1], &mut rng));
        let l: Vec<f32> = c.items().iter().map(|t| t.logit).collect();
        assert_eq!(l, [1.0, -4.0, 2.0]);
    }

    #[test]
    fn presence_and_frequency_count_generated_tokens_only() {
        let mut rng = Rng::seeded(0);
        let mut c = Candidates::default();
        c.reset(&[0.0, 0.0, 0.0]);
        let history = [2, 0, 0, 1];
        let mut cx = SamplingContext {
            history: &history,
            n_prompt: 1,
            rng: &mut rng,
        };
        PresenceFrequencyPenalty {
            presence: 0.5,
            frequency: 0.25,
        }
        .apply(&mut c, &mut cx);
        let l: Vec<f32> = c.items().iter().map(|t| t.logit).collect();
        assert_eq!(l, [-1.0, -0.75, 0.0]);
    }

    #[test]
    fn draws_follow_the_distribution_and_replay_with_the_seed() {
        let logits = [0.0f32, 1.0, 2.0, -1.0];
        let p = softmax(&logits);
        let params = SamplingParams {
            do_sample: true,
            ..Default::default()
        };
        let mut chain = SamplerChain::from_params(&params);
        assert_eq!(chain.names(), ["draw"]);
        let mut rng = Rng::seeded(123);
        let n = 40_000;
        let mut counts = [0usize; 4];
        let mut first = Vec::new();
        for i in 0..n {
            let t = chain.sample(&logits, &mut ctx(&[], &mut rng)).unwrap();
            counts[t as usize] += 1;
            if i < 50 {
                first.push(t);
            }
        }
        for i in 0..4 {
            let f = counts[i] as f64 / n as f64;
            let sd = (p[i] * (1.0 - p[i]) / n as f64).sqrt();
            assert!((f - p[i]).abs() < 6.0 * sd, "token {i}: {f} vs {}", p[i]);
        }
        let mut rng2 = Rng::seeded(123);
        let again: Vec<u32> = (0..50)
            .map(|_| chain.sample(&logits, &mut ctx(&[], &mut rng2)).unwrap())
            .collect();
        assert_eq!(first, again);
    }

    #[test]
    fn chain_order_is_configurable_and_matters() {
        // top-k before temperature vs. the default: with k = 1 only the best survives either
        // way, so use top-p, whose kept set depends on whether temperature ran first.
        let logits = [2.0f32, 1.0, 0.0];
        let hot = SamplingParams {
            do_sample: true,
            temperature: 10.0,
            top_p: 0.5,
            ..Default::default()
        };
        let mut default_chain = SamplerChain::from_params(&hot);
        assert_eq!(default_chain.names(), ["top_p", "temperature", "draw"]);
        let temp_first = SamplingParams {
            order: vec![SamplerKind::Temperature, SamplerKind::TopP],
            ..hot.clone()
        };
        let mut other = SamplerChain::from_params(&temp_first);
        assert_eq!(other.names(), ["temperature", "top_p", "draw"]);
        let mut rng = Rng::seeded(5);
        let picks: std::collections::BTreeSet<u32> = (0..200)
            .map(|_| {
                default_chain
                    .sample(&logits, &mut ctx(&[], &mut rng))
                    .unwrap()
            })
            .collect();
        assert_eq!(picks.into_iter().collect::<Vec<_>>(), [0]);
        let picks: std::collections::BTreeSet<u32> = (0..200)
            .map(|_| other.sample(&logits, &mut ctx(&[], &mut rng)).unwrap())
            .collect();
        assert!(
            picks.len() >= 2,
            "flattened first, top_p keeps more: {picks:?}"
        );
    }

    #[test]
    fn all_masked_is_an_error_not_a_panic() {
        let mut rng = Rng::seeded(0);
        let params = SamplingParams {
            do_sample: true,
            ..Default::default()
        };
        let mut chain = SamplerChain::from_params(&params);
        let err = chain
            .sample(&[f32::NEG_INFINITY; 3], &mut ctx(&[], &mut rng))
            .unwrap_err();
        assert!(
            err.to_string().contains("no token could be selected"),
            "{err}"
        );
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = SamplingParams {
            top_p: 1.5,
            ..Default::default()
        };
        assert!(bad.validate(10).unwrap_err().to_string().contains("top_p"));
        let bad = SamplingParams {
            logit_bias: vec![(10, 1.0)],
            ..Default::default()
        };
        assert!(bad
            .validate(10)
            .unwrap_err()
            .to_string()
            .contains("token id 10"));
        assert!(SamplingParams::default().validate(10).is_ok());
    }
}
