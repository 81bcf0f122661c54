//! One session's conversation as the chat route takes it: the system prompt, then user
//! messages and the model's replies exactly as it streamed them.

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// The messages so far, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    messages: Vec<Message>,
}

impl Conversation {
    /// A conversation opened by its system prompt (none when empty).
    pub fn new(system: &str) -> Conversation {
        let mut c = Conversation::default();
        if !system.is_empty() {
            c.push(Role::System, system.to_string());
        }
        c
    }

    pub fn push(&mut self, role: Role, content: String) {
        self.messages.push(Message { role, content });
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The `messages` array of a chat request.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.messages
                .iter()
                .map(|m| json!({"role": m.role.name(), "content": m.content}))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_sent_back_verbatim_in_order() {
        let mut c = Conversation::new("sys");
        c.push(Role::User, "doc".into());
        c.push(Role::Assistant, " reply with  spaces\n".into());
        c.push(Role::User, "more".into());
        let j = c.to_json();
        assert_eq!(j[0]["role"], "system");
        assert_eq!(
            j[2],
            json!({"role": "assistant", "content": " reply with  spaces\n"})
        );
        assert_eq!(j.as_array().unwrap().len(), 4);
        assert_eq!(Conversation::new("").messages().len(), 0);
    }
}
