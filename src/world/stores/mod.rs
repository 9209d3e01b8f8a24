//! The durable stores: the database (tables, outbox, inbox, ledger), the event
//! store's command handler, the broker, the artifact store and the cache.
//! Only the database, broker and store are authoritative.

pub mod broker;
pub mod cache;
pub mod db;
pub mod events;
pub mod store;
