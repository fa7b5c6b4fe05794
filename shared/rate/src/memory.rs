//! Buckets in this process only (tests, simulations, benchmarks): the two conditional writes
//! under one lock, in the order callers reach it — the apply order of a store's single item.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::BucketError;
use crate::gcra::BucketState;
use crate::ports::{Applied, BucketStore};

#[derive(Default)]
pub struct MemoryBuckets {
    buckets: Mutex<HashMap<String, BucketState>>,
}

#[async_trait]
impl BucketStore for MemoryBuckets {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        Ok(self.buckets.lock().unwrap_or_else(|p| p.into_inner()).get(bucket).copied())
    }

    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        match buckets.get_mut(bucket) {
            Some(state) if state.tat_us >= now_us && state.tat_us <= max_us => {
                state.tat_us = state.tat_us.saturating_add(add_us);
                Ok(Applied::Done(*state))
            }
            other => Ok(Applied::Refused(other.map(|s| *s))),
        }
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        match buckets.get(bucket).copied() {
            Some(state) if state.tat_us >= now_us => Ok(Applied::Refused(Some(state))),
            _ => {
                let state = BucketState { tat_us };
                buckets.insert(bucket.to_owned(), state);
                Ok(Applied::Done(state))
            }
        }
    }
}
