//! The admission HTTP API: `POST /mutate`. Built as a plain axum `Router` so tests can
//! call it in process, without sockets or TLS.

mod errors;
mod handlers;
mod state;

use std::sync::Arc;

use axum::Router;
use axum::routing::post;

pub use errors::ApiError;
pub use state::{AppState, Limits};

use crate::world::World;

pub fn router<W: World>(state: Arc<AppState<W>>) -> Router {
    Router::new()
        .route("/mutate", post(handlers::mutate::<W>))
        .fallback(handlers::not_found)
        .with_state(state)
}

#[cfg(test)]
mod tests;
