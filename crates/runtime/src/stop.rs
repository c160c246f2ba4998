//! Stop criteria: EOS and stop tokens, stop strings that may span token boundaries, token
//! limits, cancellation, and the finish reason they produce.

/// Why a generation ended. When several apply at the same step the order of precedence is
/// cancellation, then a stop string, then an end-of-sequence/stop token, then the length limit:
/// a model that ends its answer exactly at the limit finished, it was not cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-sequence or stop token was produced (not emitted as text).
    Eos,
    /// A stop string appeared in the output (it and what follows are not emitted).
    StopString,
    /// `max_new_tokens` was reached.
    Length,
    /// The caller cancelled (closed the stream).
    Cancelled,
}

impl FinishReason {
    /// The OpenAI-style name: `stop`, `length` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Eos | FinishReason::StopString => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// What [`StopStrings::push`] decided about one new piece of text.
#[derive(Debug, PartialEq, Eq)]
pub enum StopStep {
    /// Keep going; `emit` is safe to show (it cannot be the start of a stop string).
    Continue { emit: String },
    /// A stop string matched; `emit` is the text before it. Nothing after may be shown.
    Stop { emit: String },
}

/// Watches streamed text for stop strings. Text that might be the beginning of a stop string is
/// held back until it is known not to be one, so a stop string is never partly emitted.
#[derive(Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
}

impl StopStrings {
    /// Empty strings are ignored (they would match everywhere).
    pub fn new(stops: &[String]) -> StopStrings {
        StopStrings {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Reserve room so that pushing pieces of at most `piece_bytes` bytes never allocates:
    /// what is held back is shorter than the longest stop string.
    pub fn reserve_for_pieces(&mut self, piece_bytes: usize) {
        if let Some(longest) = self.stops.iter().map(String::len).max() {
            self.held.reserve(longest.saturating_add(piece_bytes));
        }
    }

    pub fn push(&mut self, piece: &str) -> StopStep {
        let mut emit = String::new();
        if self.push_to(piece, &mut emit) {
            StopStep::Stop { emit }
        } else {
            StopStep::Continue { emit }
        }
    }

    /// [`push`](Self::push) appending the text that is safe to show to `out`; true when a stop
    /// string matched (nothing after it may be shown).
    pub fn push_to(&mut self, piece: &str, out: &mut String) -> bool {
        if self.stops.is_empty() {
            out.push_str(piece);
            return false;
        }
        self.held.push_str(piece);
        // Earliest match wins; among matches at the same place, the longest.
        let earliest = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = earliest {
            out.push_str(&self.held[..at]);
            self.held.clear();
            return true;
        }
        // Hold back the longest suffix that is a proper prefix of some stop string.
        let keep_from = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.held[i..];
                self.stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .unwrap_or(self.held.len());
        out.push_str(&self.held[..keep_from]);
        self.held.drain(..keep_from);
        false
    }

    /// Text held back when generation ends for another reason: it was not a stop string.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// [`flush`](Self::flush) appending to `out`.
    pub fn flush_to(&mut self, out: &mut String) {
        out.push_str(&self.held);
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopStrings::new(&stops);
        let mut out = String::new();
        for p in pieces {
            match m.push(p) {
                StopStep::Continue { emit } => out.push_str(&emit),
                StopStep::Stop { emit } => {
                    out.push_str(&emit);
                    return (out, true);
                }
            }
        }
        out.push_str(&m.flush());
        (out, false)
    }

    #[test]
    fn stop_string_spanning_pieces_is_not_emitted() {
        assert_eq!(
            run(&["\nUser:"], &["Hello", " there\n", "Us", "er:", " more"]),
            ("Hello there".into(), true)
        );
    }

    #[test]
    fn near_miss_is_released_unchanged() {
        assert_eq!(run(&["STOP"], &["a ST", "OP", "x"]), ("a ".into(), true));
        assert_eq!(
            run(&["STOP"], &["a ST", "OX", "y"]),
            ("a STOXy".into(), false)
        );
        assert_eq!(
            run(&["STOP"], &["ends with ST"]),
            ("ends with ST".into(), false)
        );
    }

    #[test]
    fn emitted_text_never_contains_a_prefix_that_later_completes() {
        let stops: Vec<String> = vec!["<end>".into()];
        let mut m = StopStrings::new(&stops);
        assert_eq!(m.push("x<"), StopStep::Continue { emit: "x".into() });
        assert_eq!(
            m.push("en"),
            StopStep::Continue {
                emit: String::new()
            }
        );
        assert_eq!(
            m.push("d>tail"),
            StopStep::Stop {
                emit: String::new()
            }
        );
    }

    #[test]
    fn earliest_of_several_and_multibyte_text() {
        assert_eq!(run(&["b", "ab"], &["xxab"]), ("xx".into(), true));
        assert_eq!(
            run(&["日本"], &["今日は", "日", "本です"]),
            ("今日は".into(), true)
        );
        assert_eq!(run(&["é!"], &["café", " ok"]), ("café ok".into(), false));
    }

    #[test]
    fn no_stops_passes_everything_through() {
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
        assert_eq!(run(&[""], &["a", "b"]), ("ab".into(), false));
    }

    #[test]
    fn finish_reason_names() {
        assert_eq!(FinishReason::Eos.as_str(), "stop");
        assert_eq!(FinishReason::StopString.as_str(), "stop");
        assert_eq!(FinishReason::Length.as_str(), "length");
    }
}
