//! The token vocabulary as bytes, and its byte trie (built once per vocabulary, shared by every
//! grammar compiled against it).

use crate::error::{Error, Result};

/// Every token's bytes plus the end-of-sequence ids, with a byte trie over the tokens.
///
/// Tokens without bytes (`None`: special tokens, ids the decoder drops) and empty tokens are never
/// allowed by a grammar; EOS ids are allowed exactly when the grammar can end.
#[derive(Debug)]
pub struct TokenVocabulary {
    bytes: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` is token `id`'s range of `bytes`.
    offsets: Vec<usize>,
    present: Vec<bool>,
    eos: Vec<u32>,
    pub(crate) trie: Trie,
}

/// A byte trie laid out in depth-first order: node `i`'s subtree is `i..end[i]`, its parent state
/// is the one at `depth[i] - 1` on the walk.
#[derive(Debug, Default)]
pub(crate) struct Trie {
    pub byte: Vec<u8>,
    pub depth: Vec<u32>,
    pub end: Vec<u32>,
    /// `tok_start[i]..tok_start[i + 1]` indexes `tokens` for the tokens ending at node `i`.
    pub tok_start: Vec<u32>,
    pub tokens: Vec<u32>,
}

impl TokenVocabulary {
    /// A vocabulary from each token's bytes (`None` for tokens that can never be emitted, such as
    /// special tokens) and the end-of-sequence ids.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, eos_ids: &[u32]) -> Result<Self> {
        let n = tokens.len();
        if n >= u32::MAX as usize {
            return Err(Error::Vocabulary(format!("{n} tokens: too many")));
        }
        for &e in eos_ids {
            if e as usize >= n {
                return Err(Error::Vocabulary(format!(
                    "EOS id {e} is out of range: the vocabulary has {n} tokens"
                )));
            }
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(n + 1);
        let mut present = Vec::with_capacity(n);
        offsets.push(0);
        for t in &tokens {
            if let Some(b) = t {
                bytes.extend_from_slice(b);
            }
            present.push(t.is_some());
            offsets.push(bytes.len());
        }
        let mut eos = eos_ids.to_vec();
        eos.sort_unstable();
        eos.dedup();
        let mut v = TokenVocabulary {
            bytes,
            offsets,
            present,
            eos,
            trie: Trie::default(),
        };
        v.trie = v.build_trie();
        Ok(v)
    }

    fn build_trie(&self) -> Trie {
        let mut ids: Vec<u32> = (0..self.len() as u32)
            .filter(|&id| {
                self.token_bytes(id).is_some_and(|b| !b.is_empty())
                    && self.eos.binary_search(&id).is_err()
            })
            .collect();
        ids.sort_by(|&a, &b| self.raw(a).cmp(self.raw(b)).then(a.cmp(&b)));
        let mut t = Trie::default();
        // Open nodes, one per depth of the current path.
        let mut open: Vec<u32> = Vec::new();
        let mut prev: &[u8] = &[];
        for &id in &ids {
            let b = self.raw(id);
            let lcp = prev.iter().zip(b).take_while(|(x, y)| x == y).count();
            while open.len() > lcp {
                let node = open.pop().expect("open node");
                t.end[node as usize] = t.byte.len() as u32;
            }
            for (d, &byte) in b.iter().enumerate().skip(lcp) {
                open.push(t.byte.len() as u32);
                t.byte.push(byte);
                t.depth.push(d as u32 + 1);
                t.end.push(0);
                t.tok_start.push(t.tokens.len() as u32);
            }
            t.tokens.push(id);
            prev = b;
        }
        while let Some(node) = open.pop() {
            t.end[node as usize] = t.byte.len() as u32;
        }
        t.tok_start.push(t.tokens.len() as u32);
        t
    }

    fn raw(&self, id: u32) -> &[u8] {
        &self.bytes[self.offsets[id as usize]..self.offsets[id as usize + 1]]
    }

    /// The number of tokens (the logits' width).
    pub fn len(&self) -> usize {
        self.present.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.present.is_empty()
    }

    /// Token `id`'s bytes; `None` for tokens that are never emitted and ids out of range.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        (*self.present.get(id as usize)?).then(|| self.raw(id))
    }

    /// The end-of-sequence ids (sorted).
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Whether `id` is an end-of-sequence id.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// The number of `u64` words of a token bitmask for this vocabulary.
    pub fn mask_words(&self) -> usize {
        self.len().div_ceil(64)
    }

    /// Number of trie nodes (what one unpruned walk visits).
    pub fn trie_nodes(&self) -> usize {
        self.trie.byte.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trie_is_depth_first_with_subtree_ends() {
        let toks = ["a", "ab", "abc", "b", "ab", "", "ba"]
            .iter()
            .map(|s| Some(s.as_bytes().to_vec()))
            .chain([None])
            .collect();
        let v = TokenVocabulary::new(toks, &[7]).unwrap();
        let t = &v.trie;
        // nodes: a(0) b(1) c(2) b(3) a(4)
        assert_eq!(t.byte, b"abcba");
        assert_eq!(t.depth, [1, 2, 3, 1, 2]);
        assert_eq!(t.end, [3, 3, 3, 5, 5]);
        let at = |i: usize| &t.tokens[t.tok_start[i] as usize..t.tok_start[i + 1] as usize];
        assert_eq!(at(0), [0]);
        assert_eq!(at(1), [1, 4]);
        assert_eq!(at(2), [2]);
        assert_eq!(at(3), [3]);
        assert_eq!(at(4), [6]);
        assert!(TokenVocabulary::new(vec![None], &[3]).is_err());
    }
}
