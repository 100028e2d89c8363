//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB,
//! and sharded pub/sub: SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH.
//!
//! The registry ([`PubSub`]) maps channels and patterns to subscriber ids;
//! PUBLISH encodes each message in its receiver's protocol and queues it on
//! the receiver's [`crate::net::clients::Outbox`], which the receiver's connection
//! task writes out. A receiver over its output limit is disconnected.

use std::collections::HashMap;

use bytes::Bytes;

use super::flags::*;
use super::spec::ChannelArgs;
use super::{CommandSpec, Ctx};
use crate::errors;
use crate::net::clients::ClientState;
use crate::protocol::Reply;
use crate::state::ServerState;
use crate::store::glob;

macro_rules! spec {
    ($($row:tt)*) => { command!("pubsub", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Listen for messages published to the given channels", subscribe).channels(ChannelArgs::ALL),
    spec!("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Stop listening for messages posted to the given channels", unsubscribe),
    spec!("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Listen for messages published to channels matching the given patterns", psubscribe).channels(ChannelArgs::PATTERNS),
    spec!("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Stop listening for messages posted to channels matching the given patterns", punsubscribe),
    spec!("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, 0, "Post a message to a channel", publish).channels(ChannelArgs::FIRST),
    spec!("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, 0, "Post a message to a shard channel", spublish).channels(ChannelArgs::FIRST),
    spec!("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Listen for messages published to the given shard channels", ssubscribe).channels(ChannelArgs::ALL),
    spec!("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK, 0, "Stop listening for messages posted to the given shard channels", sunsubscribe),
    spec!("pubsub", -2, 0, 0, "A container for Pub/Sub commands", super::container, PUBSUB_SUBCOMMANDS),
];

#[rustfmt::skip]
static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    subcommand!("pubsub", "pubsub|channels", -2, PUBSUB | LOADING | STALE, 0, pubsub_channels),
    subcommand!("pubsub", "pubsub|numsub", -2, PUBSUB | LOADING | STALE, 0, pubsub_numsub),
    subcommand!("pubsub", "pubsub|numpat", 2, PUBSUB | LOADING | STALE, 0, pubsub_numpat),
    subcommand!("pubsub", "pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, 0, pubsub_shardchannels),
    subcommand!("pubsub", "pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, 0, pubsub_shardnumsub),
    subcommand!("pubsub", "pubsub|help", 2, LOADING | STALE, 0, pubsub_help),
];

/// Channels, patterns and shard channels to subscriber ids.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Bytes, Vec<u64>>,
    patterns: HashMap<Bytes, Vec<u64>>,
    /// SSUBSCRIBE's channels: a namespace of their own (SPUBLISH reaches
    /// only these, PUBLISH never does), which a cluster routes by slot.
    shard_channels: HashMap<Bytes, Vec<u64>>,
}

fn add(map: &mut HashMap<Bytes, Vec<u64>>, key: &Bytes, id: u64) {
    map.entry(key.clone()).or_default().push(id);
}

fn remove(map: &mut HashMap<Bytes, Vec<u64>>, key: &[u8], id: u64) {
    if let Some(ids) = map.get_mut(key) {
        ids.retain(|&i| i != id);
        if ids.is_empty() {
            map.remove(key);
        }
    }
}

impl PubSub {
    /// Drops every subscription of a client (disconnect, RESET).
    pub fn forget(&mut self, client: &mut ClientState) {
        for ch in client.channels.drain(..) {
            remove(&mut self.channels, &ch, client.id);
        }
        for p in client.patterns.drain(..) {
            remove(&mut self.patterns, &p, client.id);
        }
        for ch in client.shard_channels.drain(..) {
            remove(&mut self.shard_channels, &ch, client.id);
        }
    }

    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// Shard channels with a subscriber (INFO `pubsubshard_channels`).
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.len()
    }

    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<u64>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }
}

/// The three subscription namespaces and their reply words.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn list(self, client: &mut ClientState) -> &mut Vec<Bytes> {
        match self {
            Kind::Channel => &mut client.channels,
            Kind::Pattern => &mut client.patterns,
            Kind::Shard => &mut client.shard_channels,
        }
    }

    fn words(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }

    /// The count a (un)subscribe reply carries: channels and patterns
    /// together, shard channels on their own (Redis's
    /// `clientSubscriptionsCount` and `clientShardSubscriptionsCount`).
    fn count(self, client: &ClientState) -> i64 {
        match self {
            Kind::Channel | Kind::Pattern => (client.channels.len() + client.patterns.len()) as i64,
            Kind::Shard => client.shard_channels.len() as i64,
        }
    }
}

fn event(kind: &'static str, name: Option<Bytes>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        name.map_or(Reply::Nil, Reply::Bulk),
        Reply::Int(count),
    ])
}

fn subscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind) -> Reply {
    let mut replies = Vec::with_capacity(args.len() - 1);
    for name in &args[1..] {
        let name = crate::store::db::owned(name);
        let list = kind.list(ctx.client);
        if !list.contains(&name) {
            list.push(name.clone());
            add(ctx.server.pubsub.map(kind), &name, ctx.client.id);
        }
        replies.push(event(kind.words().0, Some(name), kind.count(ctx.client)));
    }
    Reply::Many(replies)
}

fn unsubscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind) -> Reply {
    let word = kind.words().1;
    let names: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        kind.list(ctx.client).clone()
    };
    if names.is_empty() {
        return event(word, None, kind.count(ctx.client));
    }
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        let list = kind.list(ctx.client);
        if let Some(pos) = list.iter().position(|n| *n == name) {
            list.remove(pos);
            remove(ctx.server.pubsub.map(kind), &name, ctx.client.id);
        }
        replies.push(event(word, Some(name), kind.count(ctx.client)));
    }
    Reply::Many(replies)
}

fn subscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    subscribe_generic(ctx, args, Kind::Channel)
}

fn psubscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    subscribe_generic(ctx, args, Kind::Pattern)
}

fn unsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    unsubscribe_generic(ctx, args, Kind::Channel)
}

fn punsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    unsubscribe_generic(ctx, args, Kind::Pattern)
}

/// SSUBSCRIBE: refused where a reply per command is expected (inside
/// EXEC; scripts never get here, NOSCRIPT), as Redis refuses it for a
/// `CLIENT_DENY_BLOCKING` client.
fn ssubscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.deny_blocking() {
        return errors::err(errors::SSUBSCRIBE_DENY_BLOCKING);
    }
    subscribe_generic(ctx, args, Kind::Shard)
}

fn sunsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    unsubscribe_generic(ctx, args, Kind::Shard)
}

/// Queues `reply` for each of `ids` (the running client is `current`: it
/// is out of the registry while its batch runs); a receiver over its
/// output limit is closed.
fn deliver(server: &ServerState, current: Option<&ClientState>, deliveries: &[(u64, Reply)], now: u64) {
    for (id, reply) in deliveries {
        let client = match current {
            Some(c) if c.id == *id => Some(c),
            _ => server.clients.get(*id),
        };
        if let Some(client) = client {
            let mut out = bytes::BytesMut::new();
            reply.encode(&mut out, client.resp3);
            if !client.outbox.push(out.freeze(), now, server.client_limits.of(client)) {
                crate::net::client_mem::closed_for_output(client, now);
            }
        }
    }
}

/// Delivers `message` on `channel` to every subscriber; returns how many
/// received it. `current` is the client running the command (it is not in
/// the registry while its batch runs).
pub(crate) fn publish_to(
    server: &ServerState,
    current: Option<&ClientState>,
    channel: &[u8],
    message: &[u8],
    now: u64,
) -> usize {
    deliver_published(server, current, channel, message, false, now)
}

/// [`publish_to`] for PUBLISH (`sharded` false: the channel's and the
/// matching patterns' subscribers) or SPUBLISH (the shard channel's).
pub(crate) fn deliver_published(
    server: &ServerState,
    current: Option<&ClientState>,
    channel: &[u8],
    message: &[u8],
    sharded: bool,
    now: u64,
) -> usize {
    let (subscribers, kind) = if sharded {
        (&server.pubsub.shard_channels, "smessage")
    } else {
        (&server.pubsub.channels, "message")
    };
    let mut deliveries: Vec<(u64, Reply)> = Vec::new();
    if let Some(ids) = subscribers.get(channel) {
        for &id in ids {
            deliveries.push((
                id,
                Reply::Push(vec![
                    Reply::bulk(kind),
                    Reply::Bulk(Bytes::copy_from_slice(channel)),
                    Reply::Bulk(Bytes::copy_from_slice(message)),
                ]),
            ));
        }
    }
    // Patterns never match a shard channel.
    for (pattern, ids) in server.pubsub.patterns.iter().filter(|_| !sharded) {
        if glob::matches(pattern, channel, false) {
            for &id in ids {
                deliveries.push((
                    id,
                    Reply::Push(vec![
                        Reply::bulk("pmessage"),
                        Reply::Bulk(pattern.clone()),
                        Reply::Bulk(Bytes::copy_from_slice(channel)),
                        Reply::Bulk(Bytes::copy_from_slice(message)),
                    ]),
                ));
            }
        }
    }
    deliver(server, current, &deliveries, now);
    deliveries.len()
}

/// SPUBLISH: to the shard channel's subscribers only (patterns never
/// match a shard channel). In a cluster, to the other nodes of this
/// node's shard over the bus (they deliver it to their own subscribers);
/// outside one, to replicas as PUBLISH is.
fn spublish(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let receivers = deliver_published(ctx.server, Some(ctx.client), &args[1], &args[2], true, ctx.now);
    if !propagate_publish(ctx, &args[1], &args[2], true) {
        ctx.force_propagation_to_replicas();
    }
    Reply::Int(receivers as i64)
}

/// In cluster mode, hands a published message to the bus (`sharded`: to
/// the nodes of this node's shard; otherwise to every node) and returns
/// true: Redis does not also replicate it then, or a replica's
/// subscribers would hear it twice. False outside a cluster.
fn propagate_publish(ctx: &mut Ctx, channel: &[u8], message: &[u8], sharded: bool) -> bool {
    let config = &ctx.server.config.cluster;
    match ctx.server.cluster.as_deref_mut() {
        Some(cluster) => {
            cluster.propagate_publish(config, channel, message, sharded);
            true
        }
        None => false,
    }
}

/// Publishes `expired` keyspace events for the keys expiry removed in
/// `dbs` since the last call (nothing unless `flags` enables them).
pub(crate) fn publish_expired(
    dbs: &mut [crate::store::Db],
    server: &mut ServerState,
    current: Option<&ClientState>,
    now: u64,
    alone: bool,
) {
    let flags = server.config.notify_keyspace_events;
    for (i, db) in dbs.iter_mut().enumerate() {
        if !db.has_logged() {
            continue;
        }
        for key in db.take_expired() {
            // An expired key's effect is its DEL (Redis's `propagateDeletion`):
            // before the command's own, or a unit of its own from active expiry.
            if server.effects.active() {
                let del = vec![Bytes::from_static(b"DEL"), key.clone()];
                if alone {
                    server.effects.record_alone(i, del);
                } else {
                    server.effects.also_propagate(i, del);
                }
            }
            if flags == 0 {
                continue;
            }
            for (channel, message) in crate::notify::messages(flags, crate::notify::EXPIRED, "expired", &key, i) {
                publish_to(server, current, &channel, &message, now);
            }
        }
        // Keys created since: Redis announces `new` as it adds the key,
        // before the command's own event.
        for key in db.take_new() {
            for (channel, message) in crate::notify::messages(flags, crate::notify::NEW, "new", &key, i) {
                publish_to(server, current, &channel, &message, now);
            }
        }
    }
}

/// PUBLISH: delivered here; in a cluster, to every node over the bus (each
/// delivers it to its own subscribers); outside one, to replicas (not the
/// append-only file) as Redis forces it, so their subscribers hear it too.
fn publish(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let receivers = publish_to(ctx.server, Some(ctx.client), &args[1], &args[2], ctx.now);
    if !propagate_publish(ctx, &args[1], &args[2], false) {
        ctx.force_propagation_to_replicas();
    }
    Reply::Int(receivers as i64)
}

fn pubsub_channels(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "PUBSUB");
    }
    let pattern = args.get(2);
    Reply::Array(
        ctx.server
            .pubsub
            .channels
            .keys()
            .filter(|ch| pattern.is_none_or(|p| glob::matches(p, ch, false)))
            .map(|ch| Reply::Bulk(ch.clone()))
            .collect(),
    )
}

fn pubsub_numsub(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut out = Vec::with_capacity(2 * (args.len() - 2));
    for ch in &args[2..] {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(
            ctx.server.pubsub.channels.get(ch).map_or(0, |ids| ids.len()) as i64,
        ));
    }
    Reply::Array(out)
}

fn pubsub_numpat(ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.server.pubsub.numpat() as i64)
}

fn pubsub_help(_ctx: &mut Ctx, _args: &[Bytes]) -> Reply {
    super::server::help_reply(&[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
    ])
}

/// PUBSUB SHARDCHANNELS [pattern]: the shard channels with a subscriber.
fn pubsub_shardchannels(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return errors::sub_wrong_args(&args[1], "PUBSUB");
    }
    let pattern = args.get(2);
    Reply::Array(
        ctx.server
            .pubsub
            .shard_channels
            .keys()
            .filter(|ch| pattern.is_none_or(|p| glob::matches(p, ch, false)))
            .map(|ch| Reply::Bulk(ch.clone()))
            .collect(),
    )
}

/// PUBSUB SHARDNUMSUB [channel ...]: each channel with its shard subscribers.
fn pubsub_shardnumsub(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let subscribers = |c: &Bytes| ctx.server.pubsub.shard_channels.get(c).map_or(0, |ids| ids.len()) as i64;
    Reply::Array(
        args[2..]
            .iter()
            .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Int(subscribers(c))])
            .collect(),
    )
}

/// PING while subscribed in RESP2: `["pong", message]`.
pub(crate) fn subscribed_ping(args: &[Bytes]) -> Reply {
    Reply::Array(vec![
        Reply::bulk("pong"),
        Reply::Bulk(args.get(1).cloned().unwrap_or_default()),
    ])
}
