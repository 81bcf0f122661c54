//! Error answers in each API's own JSON shape, so clients parse them as they would a real server's.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Which error JSON a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SGLang native: `{"error":{"message":…}}`.
    Native,
    /// OpenAI/vLLM: `{"object":"error","message":…,"type":…,"code":…}`.
    OpenAi,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub dialect: Dialect,
}

impl ApiError {
    pub fn new(dialect: Dialect, status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            dialect,
        }
    }

    pub fn bad_request(dialect: Dialect, message: impl Into<String>) -> ApiError {
        ApiError::new(dialect, StatusCode::BAD_REQUEST, message)
    }
}

fn openai_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "BadRequestError",
        StatusCode::NOT_FOUND => "NotFoundError",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailableError",
        StatusCode::TOO_MANY_REQUESTS => "RateLimitError",
        _ => "InternalServerError",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.dialect {
            Dialect::Native => json!({ "error": { "message": self.message } }),
            Dialect::OpenAi => json!({
                "object": "error",
                "message": self.message,
                "type": openai_type(self.status),
                "param": null,
                "code": self.status.as_u16(),
            }),
        };
        (self.status, Json(body)).into_response()
    }
}

/// Parse a JSON request body, answering 400 with serde's reason when it does not fit.
pub fn parse_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    dialect: Dialect,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            dialect,
            "the request body must be a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(dialect, format!("invalid request body: {e}")))
}
