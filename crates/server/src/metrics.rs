//! `GET /metrics`: the engine's counters and histograms in Prometheus' text format.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use torchnative_runtime::engine::{Histogram, FINISH_REASONS};

use crate::AppState;

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(&state),
    )
}

fn render(state: &AppState) -> String {
    let s = state.engine.stats();
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    };
    let queued = s.queued.load(Ordering::Relaxed) as f64;
    let running = s.running.load(Ordering::Relaxed) as f64;
    let slots = s.slots_total.load(Ordering::Relaxed) as f64;
    gauge(
        "torchnative_queue_depth",
        "Requests accepted and waiting for a slot.",
        queued,
    );
    gauge(
        "torchnative_running_requests",
        "Requests holding a KV slot (the running batch).",
        running,
    );
    gauge(
        "torchnative_sequence_slots_free",
        "Sequence slots free (of --parallel).",
        slots - running,
    );
    let blocks = s.kv_blocks_total.load(Ordering::Relaxed) as f64;
    let used = s.kv_blocks_used.load(Ordering::Relaxed) as f64;
    gauge(
        "torchnative_kv_blocks_used",
        "KV cache blocks referenced by running sequences.",
        used,
    );
    gauge(
        "torchnative_kv_blocks_free",
        "KV cache blocks not referenced (free or holding a cached prefix).",
        blocks - used,
    );
    gauge(
        "torchnative_kv_blocks_cached",
        "Unreferenced KV blocks still holding a cached prefix (reusable, evictable).",
        s.kv_blocks_cached.load(Ordering::Relaxed) as f64,
    );
    let looked = s.prefix_lookup_tokens.load(Ordering::Relaxed);
    let hits = s.prefix_hit_tokens.load(Ordering::Relaxed);
    gauge(
        "torchnative_prefix_cache_hit_rate",
        "Fraction of prompt tokens found in the prefix cache.",
        if looked > 0 {
            hits as f64 / looked as f64
        } else {
            0.0
        },
    );
    gauge(
        "torchnative_last_batch_tokens",
        "Tokens in the latest forward pass.",
        s.last_batch_tokens.load(Ordering::Relaxed) as f64,
    );
    let _ = writeln!(
        out,
        "# HELP torchnative_requests_total Requests by outcome.\n\
         # TYPE torchnative_requests_total counter"
    );
    for (i, reason) in FINISH_REASONS.iter().enumerate() {
        let n = s.requests_finished[i].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "torchnative_requests_total{{outcome=\"{}\"}} {n}",
            reason_label(*reason)
        );
    }
    let failed = s.requests_failed.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "torchnative_requests_total{{outcome=\"error\"}} {failed}"
    );
    let mut counter = |name: &str, help: &str, value: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    };
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    for (name, help, value) in [
        (
            "torchnative_prompt_tokens_total",
            "Prompt tokens evaluated.",
            load(&s.prompt_tokens),
        ),
        (
            "torchnative_generated_tokens_total",
            "Tokens generated.",
            load(&s.generated_tokens),
        ),
        (
            "torchnative_engine_steps_total",
            "Forward passes run by the engine.",
            load(&s.steps),
        ),
        (
            "torchnative_prefix_cache_hit_tokens_total",
            "Prompt tokens attached from cached KV blocks instead of computed.",
            hits,
        ),
        (
            "torchnative_prefix_cache_lookup_tokens_total",
            "Prompt tokens looked up in the prefix cache.",
            looked,
        ),
        (
            "torchnative_preemptions_total",
            "Running sequences put back because the KV pool was full.",
            load(&s.preemptions),
        ),
        (
            "torchnative_speculative_drafted_tokens_total",
            "Tokens drafted by prompt lookup and verified.",
            load(&s.drafted_tokens),
        ),
        (
            "torchnative_speculative_accepted_tokens_total",
            "Drafted tokens kept (equal to the token sampled at their position).",
            load(&s.accepted_tokens),
        ),
    ] {
        counter(name, help, value);
    }
    let lat = s.latency.lock().unwrap_or_else(|p| p.into_inner()).clone();
    histogram(
        &mut out,
        "torchnative_time_to_first_token_seconds",
        "From request arrival to its first generated token.",
        &lat.time_to_first_token,
    );
    histogram(
        &mut out,
        "torchnative_inter_token_latency_seconds",
        "Between consecutive generated tokens of a request.",
        &lat.inter_token,
    );
    histogram(
        &mut out,
        "torchnative_request_latency_seconds",
        "From request arrival to its end.",
        &lat.end_to_end,
    );
    out
}

fn reason_label(r: torchnative_runtime::FinishReason) -> &'static str {
    use torchnative_runtime::FinishReason::*;
    match r {
        Eos => "eos",
        Length => "length",
        StopString => "stop_string",
        Cancelled => "cancelled",
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, &bound) in h.bounds.iter().enumerate() {
        cumulative += h.counts[i];
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    cumulative += h.counts[h.bounds.len()];
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "{name}_sum {}", h.sum);
    let _ = writeln!(out, "{name}_count {cumulative}");
}
