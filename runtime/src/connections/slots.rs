//! The connection slots: who holds them, how many one client may hold, and which connection
//! gives way when they are all taken.
//!
//! A table rather than a semaphore, because a semaphore can only make a newcomer wait or turn it
//! away, and either way sockets that never send a byte keep every slot until a timer frees it:
//! 1,100 of them kept `/healthz` from answering for two minutes. The table knows, for each
//! connection, whether a request is in flight on it (from the moment its head is read to the
//! last byte of its response), and orders the others by how long they have been waiting: a
//! socket that has not sent a complete request yet, or a keep-alive connection idle between
//! requests. When every slot is taken, a newcomer takes the slot of the one that has waited
//! longest, and that connection is closed. A flood of idle sockets from many addresses then
//! mostly evicts itself, while a real client's connection is the newest in the queue and leaves
//! it as soon as its request head arrives. Only when every slot has a request in flight is the
//! newcomer refused: the server is then busy, not squatted.
//!
//! Beside the global cap, each client address has its own, so one address cannot take the whole
//! server or churn everyone else's idle keep-alive connections out of it. An IPv6 client is
//! counted by its /64 network: a host is commonly given a whole /64, and would otherwise have
//! 2^64 addresses to spread a flood over. Connections from a trusted proxy are not counted per
//! client, since behind a proxy every client shares its address (the caller passes no
//! [`Client`] for them); the global cap still holds them.
//!
//! One mutex guards the table. It is held for a few map operations at accept and at the start
//! and end of each request, never across an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Whose connections count together against the per-client cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Client(IpAddr);

impl Client {
    /// The client an address belongs to: an IPv4 address (also written as an IPv4-mapped IPv6
    /// one), or an IPv6 address's /64 network.
    pub(super) fn of(address: IpAddr) -> Self {
        match address.to_canonical() {
            IpAddr::V6(v6) => {
                let network = u128::from(v6) & !(u128::from(u64::MAX));
                Self(IpAddr::V6(Ipv6Addr::from(network)))
            }
            v4 => Self(v4),
        }
    }
}

/// Why a newcomer got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Its client already holds its cap of connections.
    PerClient,
    /// Every slot has a request in flight, so none could be given up.
    AllBusy,
}

/// A newcomer's slot, and whether another connection was evicted to make room for it.
pub(super) struct Admitted {
    pub(super) slot: Slot,
    pub(super) evicted_another: bool,
}

/// Every connection slot of one listener.
pub(super) struct Slots {
    table: Mutex<Table>,
    max: usize,
    per_client: usize,
}

#[derive(Default)]
struct Table {
    entries: HashMap<u64, Entry>,
    /// The connections with no request in flight, by the tick at which they began waiting:
    /// the first is the one that has waited longest.
    waiting: BTreeMap<u64, u64>,
    by_client: HashMap<Client, usize>,
    /// Slots taken: entries not evicted.
    held: usize,
    /// Gives both connection ids and waiting ticks; only ever goes up.
    next: u64,
}

struct Entry {
    client: Option<Client>,
    in_flight: usize,
    started: bool,
    /// The entry's key in `waiting`, while it waits.
    waiting_since: Option<u64>,
    /// Its slot went to a newcomer; it no longer counts, and its task is told to close it.
    evicted: bool,
    eviction: Arc<Notify>,
}

impl Slots {
    /// Both caps are at least 1.
    pub(super) fn new(max: usize, per_client: usize) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            max: max.max(1),
            per_client: per_client.max(1),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a connection just accepted from `client` (`None`: a trusted proxy, not counted
    /// per client), evicting the connection that has waited longest when every slot is taken.
    pub(super) fn admit(self: &Arc<Self>, client: Option<Client>) -> Result<Admitted, Refusal> {
        let mut table = self.table();
        if let Some(client) = client
            && table.by_client.get(&client).copied().unwrap_or(0) >= self.per_client
        {
            return Err(Refusal::PerClient);
        }
        let mut evicted_another = false;
        if table.held >= self.max {
            let Some((_, victim)) = table.waiting.pop_first() else {
                return Err(Refusal::AllBusy);
            };
            table.evict(victim);
            evicted_another = true;
        }
        let id = table.tick();
        let since = table.tick();
        let eviction = Arc::new(Notify::new());
        table.entries.insert(
            id,
            Entry {
                client,
                in_flight: 0,
                started: false,
                waiting_since: Some(since),
                evicted: false,
                eviction: eviction.clone(),
            },
        );
        table.waiting.insert(since, id);
        table.held += 1;
        if let Some(client) = client {
            *table.by_client.entry(client).or_default() += 1;
        }
        Ok(Admitted {
            slot: Slot {
                slots: self.clone(),
                id,
                eviction,
            },
            evicted_another,
        })
    }

    /// Slots taken now (evicted connections still closing are not counted).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.table().held
    }

    fn start(&self, id: u64) {
        let mut table = self.table();
        let Some(entry) = table.entries.get_mut(&id) else {
            return;
        };
        entry.in_flight += 1;
        entry.started = true;
        if let Some(since) = entry.waiting_since.take() {
            table.waiting.remove(&since);
        }
    }

    fn finish(&self, id: u64) {
        let mut table = self.table();
        let since = table.tick();
        let Some(entry) = table.entries.get_mut(&id) else {
            return;
        };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        if entry.in_flight == 0 && !entry.evicted {
            // To the back of the queue: it has waited since its last response, not since accept.
            entry.waiting_since = Some(since);
            table.waiting.insert(since, id);
        }
    }

    fn release(&self, id: u64) {
        let mut table = self.table();
        let Some(entry) = table.entries.remove(&id) else {
            return;
        };
        if let Some(since) = entry.waiting_since {
            table.waiting.remove(&since);
        }
        if !entry.evicted {
            table.give_back(entry.client);
        }
    }
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn evict(&mut self, id: u64) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.evicted = true;
        entry.waiting_since = None;
        // A permit is stored if the task is not waiting yet, so the news cannot be missed.
        entry.eviction.notify_one();
        let client = entry.client;
        self.give_back(client);
    }

    fn give_back(&mut self, client: Option<Client>) {
        self.held = self.held.saturating_sub(1);
        if let Some(client) = client
            && let Some(count) = self.by_client.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                self.by_client.remove(&client);
            }
        }
    }
}

/// One connection's slot, held by its task; dropping it gives the slot back.
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    eviction: Arc<Notify>,
}

impl Slot {
    /// What the connection's service marks its requests with.
    pub(super) fn requests(&self) -> Requests {
        Requests {
            slots: self.slots.clone(),
            id: self.id,
        }
    }

    /// Resolves once the slot has gone to a newcomer (at most once).
    pub(super) async fn evicted(&self) {
        self.eviction.notified().await;
    }

    /// Whether a request head has arrived on the connection.
    pub(super) fn has_started(&self) -> bool {
        self.entry(|entry| entry.started)
    }

    /// Whether a request is in flight on the connection now.
    pub(super) fn is_busy(&self) -> bool {
        self.entry(|entry| entry.in_flight > 0)
    }

    #[cfg(test)]
    fn is_evicted(&self) -> bool {
        self.entry(|entry| entry.evicted)
    }

    fn entry(&self, read: impl FnOnce(&Entry) -> bool) -> bool {
        self.slots.table().entries.get(&self.id).is_some_and(read)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.id);
    }
}

/// Marks the requests of one connection as in flight; cheap to clone into its service.
#[derive(Clone)]
pub(super) struct Requests {
    slots: Arc<Slots>,
    id: u64,
}

impl Requests {
    /// The request whose head just arrived is in flight until the guard is dropped (with its
    /// response body, once the last byte is written).
    pub(super) fn start(&self) -> InFlight {
        self.slots.start(self.id);
        InFlight(self.clone())
    }
}

/// A request in flight; see [`Requests::start`].
pub(super) struct InFlight(Requests);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.slots.finish(self.0.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(address: &str) -> Option<Client> {
        Some(Client::of(address.parse().expect("an address")))
    }

    fn admit(slots: &Arc<Slots>, address: &str) -> Slot {
        slots.admit(client(address)).expect("admitted").slot
    }

    #[test]
    fn a_client_past_its_cap_is_refused_and_another_client_is_not() {
        let slots = Slots::new(10, 2);
        let _first = admit(&slots, "10.0.0.1");
        let second = admit(&slots, "10.0.0.1");
        assert_eq!(
            slots.admit(client("10.0.0.1")).err(),
            Some(Refusal::PerClient)
        );
        let _other = admit(&slots, "10.0.0.2");
        drop(second);
        let _again = admit(&slots, "10.0.0.1");
    }

    #[test]
    fn a_trusted_proxy_is_not_capped_per_client_but_counts_against_the_global_cap() {
        let slots = Slots::new(3, 1);
        let held: Vec<Slot> = (0..3)
            .map(|_| slots.admit(None).expect("admitted").slot)
            .collect();
        let busy: Vec<InFlight> = held.iter().map(|slot| slot.requests().start()).collect();
        assert_eq!(slots.admit(None).err(), Some(Refusal::AllBusy));
        drop(busy);
    }

    #[test]
    fn ipv6_addresses_in_one_slash_64_are_one_client() {
        let slots = Slots::new(10, 1);
        let _first = admit(&slots, "2001:db8:1:2::1");
        assert_eq!(
            slots.admit(client("2001:db8:1:2:ffff::9")).err(),
            Some(Refusal::PerClient)
        );
        let _next_network = admit(&slots, "2001:db8:1:3::1");
        let _v4 = admit(&slots, "192.0.2.7");
        assert_eq!(
            slots.admit(client("::ffff:192.0.2.7")).err(),
            Some(Refusal::PerClient),
            "an IPv4-mapped address is the IPv4 client"
        );
    }

    #[test]
    fn when_every_slot_is_taken_the_connection_waiting_longest_gives_way() {
        let slots = Slots::new(2, 10);
        let oldest = admit(&slots, "10.0.0.1");
        let newer = admit(&slots, "10.0.0.2");
        let admitted = slots.admit(client("10.0.0.3")).expect("admitted");
        assert!(admitted.evicted_another);
        assert!(oldest.is_evicted());
        assert!(!newer.is_evicted());
        assert_eq!(slots.held(), 2);
        // The evicted connection closing later does not give its slot back twice.
        drop(oldest);
        assert_eq!(slots.held(), 2);
        // Its client's count was given back at eviction.
        let _same_client = admit(&slots, "10.0.0.1");
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_evicted() {
        let slots = Slots::new(2, 10);
        let busy = admit(&slots, "10.0.0.1");
        let request = busy.requests().start();
        let idle = admit(&slots, "10.0.0.2");
        let _newcomer = admit(&slots, "10.0.0.3");
        assert!(!busy.is_evicted());
        assert!(idle.is_evicted());
        assert!(busy.has_started() && busy.is_busy());
        drop(request);
        assert!(!busy.is_busy());
    }

    #[test]
    fn when_every_slot_has_a_request_in_flight_the_newcomer_is_refused() {
        let slots = Slots::new(2, 10);
        let first = admit(&slots, "10.0.0.1");
        let second = admit(&slots, "10.0.0.2");
        let _requests = (first.requests().start(), second.requests().start());
        assert_eq!(
            slots.admit(client("10.0.0.3")).err(),
            Some(Refusal::AllBusy)
        );
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn a_keep_alive_connection_waits_from_the_end_of_its_last_response() {
        let slots = Slots::new(2, 10);
        let keep_alive = admit(&slots, "10.0.0.1");
        let silent = admit(&slots, "10.0.0.2");
        // Accepted first, but served since: the silent one has waited longer.
        drop(keep_alive.requests().start());
        let _newcomer = admit(&slots, "10.0.0.3");
        assert!(silent.is_evicted());
        assert!(!keep_alive.is_evicted());
    }

    #[tokio::test]
    async fn an_evicted_connection_is_told_even_when_it_was_not_listening_yet() {
        let slots = Slots::new(1, 10);
        let first = admit(&slots, "10.0.0.1");
        let _second = admit(&slots, "10.0.0.2");
        tokio::time::timeout(std::time::Duration::from_secs(5), first.evicted())
            .await
            .expect("told of its eviction");
    }
}
