use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::admission::review::ReviewError;
use crate::cause::Cause;

/// A request that is not a usable AdmissionReview: answered with a JSON error body.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Review(#[from] ReviewError),
    #[error("content type must be application/json, got {0:?}")]
    ContentType(String),
    #[error("request body exceeds {0} bytes")]
    TooLarge(usize),
    #[error("timed out reading the request body")]
    BodyTimeout,
    #[error("cannot read the request body: {0}")]
    Body(String),
    #[error("no such path; the admission endpoint is POST /mutate")]
    NotFound,
    #[error("too many request bytes held at once; try again")]
    Overloaded,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Review(_) | Self::Body(_) => StatusCode::BAD_REQUEST,
            Self::ContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The rest of the body may still be in flight: an HTTP/1 connection is not reusable.
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            Self::TooLarge(_) | Self::BodyTimeout | Self::Overloaded
        )
    }

    pub fn cause(&self) -> Cause {
        match self {
            Self::Review(e) => e.cause(),
            Self::ContentType(_) => Cause::ContentType,
            Self::TooLarge(_) => Cause::TooLarge,
            Self::BodyTimeout => Cause::BodyTimeout,
            Self::Body(_) => Cause::BodyRead,
            Self::NotFound => Cause::NotFound,
            Self::Overloaded => Cause::Overloaded,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.to_string(), "cause": self.cause().as_str() });
        (self.status(), Json(body)).into_response()
    }
}
