//! DynamoDB expressions with their placeholders.

use std::collections::HashMap;

use crate::item::Item;
use aws_sdk_dynamodb::types::AttributeValue;

/// An expression with its attribute-name and value placeholders (`state` is a reserved word, so
/// names always go through `#placeholders`).
pub(crate) struct Expr {
    pub(crate) text: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: Item,
}

impl Expr {
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), names: HashMap::new(), values: HashMap::new() }
    }

    pub(crate) fn name(&mut self, attribute: &str) -> &mut Self {
        self.name_of(attribute);
        self
    }

    /// Registers `#attribute` and returns it.
    pub(crate) fn name_of(&mut self, attribute: &str) -> String {
        let placeholder = format!("#{attribute}");
        self.names.insert(placeholder.clone(), attribute.to_owned());
        placeholder
    }

    pub(crate) fn value(&mut self, placeholder: &str, value: AttributeValue) -> &mut Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    /// The maps as the SDK wants them: DynamoDB rejects an empty map, so empty means absent.
    pub(crate) fn parts(&self) -> (Option<HashMap<String, String>>, Option<Item>) {
        (
            (!self.names.is_empty()).then(|| self.names.clone()),
            (!self.values.is_empty()).then(|| self.values.clone()),
        )
    }
}
