//! `torchnative serve`: the OpenAI HTTP API over the batching [`Engine`].
//!
//! Endpoints: `POST /v1/chat/completions`, `POST /v1/completions` (both with SSE streaming and
//! `stream_options.include_usage`), `POST /v1/embeddings` (when an encoder is served), `POST /v1/rerank` (when a cross-encoder is), `GET /v1/models`, `GET /health`, `GET /metrics`
//! (Prometheus text). LoRA adapters are served as models of their own name (`ServedAdapter`). Errors have OpenAI's shape (`{"error": {"message", "type", "param",
//! "code"}}`) and status codes: 400 bad request, 401 missing or wrong API key, 404 unknown model
//! or route, 413 body too large, 429 admission queue full (with `Retry-After`), 503 engine
//! stopped. A client that disconnects cancels its request: the engine frees its slot at the
//! next step.

mod api;
mod metrics;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use torchnative_runtime::{Embedder, Engine, Reranker};

pub use api::ApiError;

/// What the HTTP layer enforces on top of the engine.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The model id clients name (and `/v1/models` lists).
    pub model_name: String,
    /// Bearer token required on `/v1/*` when set.
    pub api_key: Option<String>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Largest `max_tokens` / `max_completion_tokens` a request may ask for.
    pub max_tokens_limit: usize,
    /// Largest `n` (choices per request).
    pub max_n: usize,
    /// The encoder `/v1/embeddings` serves, if any.
    pub embeddings: Option<EmbeddingModel>,
    /// The cross-encoder `/v1/rerank` serves, if any.
    pub reranker: Option<RerankModel>,
    /// LoRA adapters served as models of their own: a request naming one runs the base model
    /// with that adapter (the engine batches requests of every adapter together).
    pub adapters: Vec<ServedAdapter>,
}

/// A LoRA adapter clients choose by naming it as the request's `model`.
#[derive(Clone, Debug)]
pub struct ServedAdapter {
    /// The model id clients name (and `/v1/models` lists, its parent the base model).
    pub name: String,
    pub lora: torchnative_runtime::ActiveLora,
}

/// A sentence-embedding model served beside the language model.
#[derive(Clone, Debug)]
pub struct EmbeddingModel {
    /// The model id clients name (and `/v1/models` lists).
    pub name: String,
    pub embedder: Arc<Embedder>,
}

/// A cross-encoder served beside the language model.
#[derive(Clone, Debug)]
pub struct RerankModel {
    /// The model id clients name (and `/v1/models` lists).
    pub name: String,
    pub reranker: Arc<Reranker>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            model_name: "default".into(),
            api_key: None,
            max_body_bytes: 1 << 20,
            max_tokens_limit: 4096,
            max_n: 8,
            embeddings: None,
            reranker: None,
            adapters: Vec::new(),
        }
    }
}

/// Shared by every handler.
pub(crate) struct AppState {
    pub engine: Arc<Engine>,
    pub config: ServerConfig,
    pub created: u64,
    /// Compiled `response_format` grammars by their text (bounded), so that repeated schemas
    /// are compiled once.
    pub constraints:
        std::sync::Mutex<std::collections::HashMap<String, torchnative_runtime::Constraint>>,
}

/// The router over `engine`.
pub fn router(engine: Arc<Engine>, config: ServerConfig) -> Router {
    let body_limit = config.max_body_bytes;
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let state = Arc::new(AppState {
        engine,
        config,
        created,
        constraints: Default::default(),
    });
    Router::new()
        .route("/health", get(api::health))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/models", get(api::models))
        .route("/v1/chat/completions", post(api::chat_completions))
        .route("/v1/completions", post(api::completions))
        .route("/v1/embeddings", post(api::embeddings))
        .route("/v1/rerank", post(api::rerank))
        .fallback(api::not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// Serve on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(engine, config))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Bind `addr` and serve until Ctrl-C (the CLI's entry point). `on_ready` gets the bound
/// address (port 0 picks a free one).
pub fn run_blocking(
    addr: SocketAddr,
    engine: Arc<Engine>,
    config: ServerConfig,
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    // Requests are I/O for this runtime: the engine computes on its own threads.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        on_ready(listener.local_addr()?);
        serve(listener, engine, config, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    })
}

/// A server running on its own thread (the Python package's `torchnative.serve`): stops when
/// [`ServerHandle::stop`] is called or the handle is dropped.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl ServerHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, finish the responses in flight, and wait for the thread.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("the server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// Bind `addr` and serve on a new thread; returns once it listens.
pub fn spawn(
    addr: SocketAddr,
    engine: Arc<Engine>,
    config: ServerConfig,
) -> std::io::Result<ServerHandle> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("torchnative-server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(listener.local_addr());
                serve(listener, engine, config, async {
                    let _ = stop_rx.await;
                })
                .await
            })
        })?;
    let addr = ready_rx
        .recv()
        .map_err(|_| std::io::Error::other("the server thread ended before listening"))??;
    Ok(ServerHandle {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}
