//! The closed choices that commands and library modules share (API, endpoint, method,
//! cache busting, output format). A leaf: it depends on no other module of the crate, so
//! the library can use these without depending on the command line.

use clap::ValueEnum;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiChoice {
    Auto,
    Sglang,
    Openai,
    Vllm,
    Llamacpp,
    Tgi,
    Ollama,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Stream,
    TwoPoint,
    Both,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Stream => "stream",
            Method::TwoPoint => "two-point",
            Method::Both => "both",
        }
    }

    /// The `method` a sample records: `both` measures each, so a sample is one of the two.
    pub fn sample_name(self) -> &'static str {
        match self {
            Method::TwoPoint => Method::TwoPoint.name(),
            Method::Stream | Method::Both => Method::Stream.name(),
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheBust {
    /// Leading nonce, plus the server's flush where it offers one.
    Auto,
    /// Leading nonce only.
    Nonce,
    /// Server flush only.
    Flush,
    /// Nothing: prompts repeat and caches serve them (for demonstrating the problem).
    Off,
}

impl CacheBust {
    pub fn name(self) -> &'static str {
        match self {
            CacheBust::Auto => "auto",
            CacheBust::Nonce => "nonce",
            CacheBust::Flush => "flush",
            CacheBust::Off => "off",
        }
    }
    pub fn uses_nonce(self) -> bool {
        matches!(self, CacheBust::Auto | CacheBust::Nonce)
    }
    pub fn uses_flush(self) -> bool {
        matches!(self, CacheBust::Auto | CacheBust::Flush)
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Endpoint {
    /// The API's native or completions route (token-id prompts where possible).
    #[default]
    Completions,
    /// `/v1/chat/completions` (text prompts).
    Chat,
}
