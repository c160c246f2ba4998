//! Streaming generation as an iterator: the model runs on its own thread and hands text pieces
//! through a bounded channel, so a slow consumer slows generation instead of buffering without
//! limit. Dropping the stream (or calling [`TextStream::cancel`]) stops generation at the next
//! token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Result, RuntimeError};
use crate::llm::{session_for, Completion, Flow, GenerationConfig, Llm};

/// Pieces buffered between the generating thread and the consumer.
const STREAM_BOUND: usize = 16;

/// An iterator of text pieces of one generation; see the module docs.
pub struct TextStream {
    pieces: Receiver<String>,
    cancel: Arc<AtomicBool>,
    worker: Option<JoinHandle<Result<Completion>>>,
}

impl TextStream {
    /// Stop generating after the current token. Pieces already sent can still be read.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// A handle that cancels this stream from any thread.
    pub fn canceller(&self) -> impl Fn() + Send + Sync + 'static {
        let flag = Arc::clone(&self.cancel);
        move || flag.store(true, Ordering::Relaxed)
    }

    /// Read any remaining pieces and return the whole result (text, tokens, finish reason).
    pub fn finish(mut self) -> Result<Completion> {
        for _ in self.pieces.iter() {}
        self.join()
    }

    fn join(&mut self) -> Result<Completion> {
        match self.worker.take() {
            Some(w) => w.join().unwrap_or_else(|_| {
                Err(RuntimeError::Kernel(
                    "the generation thread panicked".into(),
                ))
            }),
            None => Err(RuntimeError::InvalidArgument {
                what: "stream".into(),
                reason: "already finished".into(),
            }),
        }
    }
}

impl Iterator for TextStream {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        self.pieces.recv().ok()
    }
}

impl Drop for TextStream {
    fn drop(&mut self) {
        if self.worker.is_some() {
            self.cancel();
            // Unblock a worker waiting on a full channel, then wait for it to stop.
            for _ in self.pieces.try_iter() {}
            let _ = self.join();
        }
    }
}

impl Llm {
    /// Generate after `prompt` (token ids) in a fresh session on a background thread, returning
    /// the pieces as an iterator. Request errors (context overflow, bad parameters) are returned
    /// here, before the thread starts.
    pub fn stream(&self, prompt: Vec<u32>, config: GenerationConfig) -> Result<TextStream> {
        let mut session = self.session(session_for(&config, prompt.len())?)?;
        config.sampling.validate(self.config().vocab_size)?;
        let (tx, rx) = sync_channel::<String>(STREAM_BOUND);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let worker = std::thread::Builder::new()
            .name("torchnative-stream".into())
            .spawn(move || {
                session.generate(&prompt, &config, &mut |piece| {
                    if flag.load(Ordering::Relaxed) || tx.send(piece.to_string()).is_err() {
                        Flow::Cancel
                    } else {
                        Flow::Continue
                    }
                })
            })
            .map_err(|e| {
                RuntimeError::Kernel(format!("cannot start the generation thread: {e}"))
            })?;
        Ok(TextStream {
            pieces: rx,
            cancel,
            worker: Some(worker),
        })
    }
}
