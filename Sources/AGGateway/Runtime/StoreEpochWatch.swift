import AGCrypto
import AGEventLoop
import AGFormats
import AGPolicy
import AGRedis

/// Notices a Redis that came back empty, from the control loop: reads the store epoch on every
/// (re)connect of its own connection and every `interval`, and reports a changed epoch loudly —
/// an error log line, `attestgate_store_resets_total`, and a `store_reset` warning in `/readyz`
/// until acknowledged (`POST /admin/v1/store/acknowledge-reset`).
///
/// A reconnect alone proves nothing (Redis may have kept its data through a restart with AOF);
/// the epoch is what tells. A Redis Cluster's shards keep or lose their data one by one, so
/// there each primary in the slot map is checked with epoch keys in slots it serves (`plan`).
/// Loop thread only: create, use and close it on `loop`.
final class StoreEpochWatch {
    /// What a Redis without its data has lost (for the log line; the README has the details).
    static let lost = "device records and revocations, challenges, rate-limit buckets, monthly active device counts, "
        + "subscriptions, runtime tier overrides, Platform SSO devices, nonces and refresh tokens (every Mac must log in again)"

    /// The epoch keys one check reads on one Redis.
    struct Probe: Equatable {
        /// The cluster primary serving the keys' slots; `nil` for one server or a
        /// Sentinel-managed primary.
        let shard: RedisURL.Endpoint?
        let keys: [String]
    }

    private typealias Reading = (key: String, observation: StoreEpoch.Observation)

    private let redis: RedisClient
    private let epoch: StoreEpoch
    private let time: any TimeSource
    private let logger: any LogSink
    private let metrics: MetricsRegistry
    private var timer: EventTimer?
    private var inFlight = false
    /// A reconnect came while a check was in flight (one that waited on a primary then lost,
    /// say): checked again once it ends, so the reconnect is not left to the next tick.
    private var reconnectQueued = false
    /// Primaries this instance has read an epoch on. A key written on one of them is not news:
    /// its earlier key moved away with its slot (resharding), and its data did not go.
    private var knownShards: Set<RedisURL.Endpoint> = []
    /// `StoreEpochScript.key(forSlot:)` is a search: once per slot.
    private var slotKeys: [UInt16: String] = [:]

    init(loop: EventLoop, url: RedisURL, timeout: Duration, interval: Duration = .seconds(5), epoch: StoreEpoch,
         time: any TimeSource, logger: any LogSink, metrics: MetricsRegistry) {
        self.epoch = epoch
        self.time = time
        self.logger = logger
        self.metrics = metrics
        redis = RedisClient(url: url, loop: loop, timeout: timeout)
        redis.onStateChange = { [unowned self] state in
            if state == .connected { check(afterReconnect: true) }
        }
        let timer = EventTimer(loop: loop) { [unowned self] in
            check(afterReconnect: false)
            self.timer?.arm(after: interval)
        }
        timer.arm(after: interval)
        self.timer = timer
    }

    /// The epoch keys to read on each primary of a cluster: the keys this instance remembers
    /// whose slots it serves now (a key moves with its slot, so resharding and failovers keep
    /// it), or, on a primary serving none of them, the key of its first slot (`key(slot)`).
    /// Slots move, so "first" changes; remembering each key's value keeps that from reading as
    /// a reset.
    static func plan(_ map: SlotMap, remembered: [String], key: (UInt16) -> String) -> [Probe] {
        let owners = Dictionary(grouping: remembered.sorted()) { map.owner(of: HashSlot.slot(of: $0)) }
        return map.servingPrimaries.compactMap { primary in
            if let keys = owners[primary] { return Probe(shard: primary, keys: keys) }
            return map.firstSlot(of: primary).map { Probe(shard: primary, keys: [key($0)]) }
        }
    }

    /// Reads (or, where missing, writes) the epochs now. Checks never overlap.
    func check(afterReconnect: Bool) {
        guard !inFlight else {
            reconnectQueued = reconnectQueued || afterReconnect
            return
        }
        guard let probes = probes() else { return }
        inFlight = true
        var readings = Array(repeating: [Reading](), count: probes.count)
        var remaining = probes.reduce(0) { $0 + $1.keys.count }
        for (index, probe) in probes.enumerated() {
            for key in probe.keys {
                read(key) { [weak self] observation in
                    guard let self else { return }
                    if let observation { readings[index].append((key, observation)) }
                    remaining -= 1
                    guard remaining == 0 else { return }
                    inFlight = false
                    for (probe, found) in zip(probes, readings) {
                        report(found, shard: probe.shard, afterReconnect: afterReconnect)
                    }
                    if reconnectQueued {
                        reconnectQueued = false
                        check(afterReconnect: true)
                    }
                }
            }
        }
    }

    /// What to read now, or `nil` when nothing can be.
    private func probes() -> [Probe]? {
        guard case .cluster = redis.url.topology else {
            return redis.isConnected ? [Probe(shard: nil, keys: [StoreEpochScript.key])] : nil
        }
        // Not only while every primary is connected: a shard that answers is checked while
        // another is down.
        guard let map = redis.slotMap else { return nil }
        let probes = Self.plan(map, remembered: epoch.rememberedKeys) { slot in
            if let known = slotKeys[slot] { return known }
            let key = StoreEpochScript.key(forSlot: slot)
            slotKeys[slot] = key
            return key
        }
        return probes.isEmpty ? nil : probes
    }

    /// Reads `key`, writing a fresh epoch when it is missing; `nil` when Redis did not answer.
    private func read(_ key: String, completion: @escaping (StoreEpoch.Observation?) -> Void) {
        let proposed = Base64.encodeURL(SecureRandom.bytes(count: 16))
        redis.evalScript(StoreEpochScript.script, keys: [key], args: [String(time.nowMicroseconds), proposed]) { [weak self] result in
            guard let self else { return }
            guard case .success(let value) = result, let reply = value.array, reply.count == 2,
                  let created = reply[0].int, let current = reply[1].string else {
                // Unreachable or slow: the next reconnect or tick checks again.
                completion(nil)
                return
            }
            completion(epoch.observe(current, key: key, created: created == 1))
        }
    }

    /// One line (and at most one reset) per Redis or shard and check, whatever number of its
    /// keys were read.
    private func report(_ readings: [Reading], shard: RedisURL.Endpoint?, afterReconnect: Bool) {
        guard !readings.isEmpty else { return }
        let known = shard.map { !knownShards.insert($0).inserted } ?? false
        let shardField: [(String, LogValue)] = shard.map { [("shard", .string($0.description))] } ?? []
        let lostKeys = readings.filter { $0.observation == .reset }.map(\.key)
        if !lostKeys.isEmpty {
            metrics.increment(MetricsRegistry.storeResets)
            epoch.noticeReset(nowMilliseconds: time.nowMilliseconds)
            logger.error("redis came back empty: the store epoch changed, its data is gone", shardField + [
                ("key", .string(lostKeys.joined(separator: " "))), ("lost", .string(Self.lost)),
                ("hint", .string("enable appendonly in Redis; devices must attest again; acknowledge with POST /admin/v1/store/acknowledge-reset")),
            ])
        } else if let written = readings.first(where: { $0.observation == .first(created: true) }) {
            if known {
                logger.info("store epoch written on a new key of a shard whose earlier epoch key moved away with its slot",
                            shardField + [("key", .string(written.key))])
            } else {
                logger.warn("redis held no store epoch: a new Redis or shard, or one that lost its data before this instance started",
                            shardField + [("key", .string(written.key)), ("lost", .string(Self.lost))])
            }
        } else if readings.contains(where: { $0.observation == .first(created: false) }) {
            logger.debug("store epoch read", shardField)
        } else if readings.contains(where: { $0.observation == .unchanged }) {
            if let shard, !known {
                logger.debug("store epoch found on a primary this instance had not read: a failover or resharding kept it",
                             [("shard", .string(shard.description))])
            } else if afterReconnect {
                logger.debug("store epoch unchanged after reconnect", shardField)
            }
        }
    }

    /// Must run on the loop before it stops.
    func close() {
        timer?.cancel()
        timer = nil
        redis.close()
    }
}
