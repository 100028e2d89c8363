//! Coordination recipes built on the `redis` crate, tested against embedded
//! coordis and a real Redis. (The recipes land with the client-tests issue.)
