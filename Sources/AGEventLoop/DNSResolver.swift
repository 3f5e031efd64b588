internal import CEvent
internal import Glibc

/// Asynchronous host-name resolution on one event loop (libevent `evdns`), with a TTL cache.
///
/// Order of lookup: an IP literal is returned as is; then the hosts file; then DNS `A` and
/// `AAAA` queries in parallel (search domains and `ndots` from resolv.conf apply). Results are
/// IPv4 first, then IPv6, each in the server's order; callers try them in turn. A DNS answer
/// is cached for its TTL (the smaller of the two record sets', capped by `maximumTTL`); call
/// `forget(_:)` after every address of a host failed, so the next attempt asks again. Failures
/// are never cached. Concurrent lookups of one name share one pair of queries.
///
/// Loop thread only. The completion runs exactly once, on the loop thread — before `resolve`
/// returns when the answer is known without a query (literal, hosts file, cache). Lookups still
/// in flight when the resolver is released are dropped without completing.
public final class DNSResolver {
    /// Where to ask and how patiently.
    public struct Configuration: Sendable, Hashable {
        /// `ip` or `ip:port` (IPv6 as `[ip]:port`) of the name servers; `nil` reads `resolvConf`.
        public var nameservers: [String]?
        /// Name servers, search domains and `ndots` when `nameservers` is `nil`.
        public var resolvConf: String
        /// Static names consulted before DNS; `nil` for none.
        public var hostsFile: String?
        /// Time to wait for one answer before retrying (evdns `timeout`).
        public var queryTimeout: Duration
        /// Tries per query (evdns `attempts`).
        public var attempts: Int
        /// Upper bound on how long an answer is cached, whatever its TTL.
        public var maximumTTL: Duration

        public init(nameservers: [String]? = nil, resolvConf: String = "/etc/resolv.conf",
                    hostsFile: String? = "/etc/hosts", queryTimeout: Duration = .seconds(1),
                    attempts: Int = 2, maximumTTL: Duration = .seconds(3600)) {
            self.nameservers = nameservers
            self.resolvConf = resolvConf
            self.hostsFile = hostsFile
            self.queryTimeout = queryTimeout
            self.attempts = attempts
            self.maximumTTL = maximumTTL
        }

        /// The machine's resolv.conf and /etc/hosts, 1 s per try, two tries.
        public static let system = Configuration()
    }

    public let configuration: Configuration
    private let evdns: OpaquePointer
    /// evdns objects may only be freed on the loop's thread (or while it is not running) and
    /// before its base: see `deinit`.
    private weak var loop: EventLoop?
    private let lifetime: LoopLifetime
    private let hosts: HostsFile
    private var cache: [String: (addresses: [IPAddress], expiry: ContinuousClock.Instant)] = [:]
    /// Lookups waiting for answers, by lower-cased name (internal for a test).
    var inFlight: [String: DNSLookup] = [:]
    /// Set once `shutDown()` freed the evdns base: `deinit` has nothing left to free.
    private var isShutDown = false

    /// Creates the loop's `evdns_base`; call on `loop`'s thread. Throws when a configured name
    /// server is not an address.
    public init(loop: EventLoop, configuration: Configuration = .system) throws(DNSError) {
        _ = Self.quietLogs
        self.configuration = configuration
        self.loop = loop
        lifetime = loop.lifetime
        // Name servers are added below; DISABLE_WHEN_INACTIVE keeps the UDP socket out of the
        // loop while no query runs.
        guard let evdns = evdns_base_new(loop.base, EVDNS_BASE_DISABLE_WHEN_INACTIVE) else {
            throw DNSError(host: "", code: DNS_ERR_UNKNOWN, reason: "evdns_base_new failed")
        }
        self.evdns = evdns
        hosts = configuration.hostsFile.map(HostsFile.load(path:)) ?? HostsFile()
        loop.adopt(self)
        if let nameservers = configuration.nameservers {
            for server in nameservers where evdns_base_nameserver_ip_add(evdns, server) != 0 {
                evdns_base_free(evdns, 0)
                isShutDown = true  // `deinit` runs on the thrown-away object: nothing left to free
                throw DNSError(host: server, code: DNS_ERR_UNKNOWN, reason: "not a name server address")
            }
        } else {
            // Not DNS_OPTION_HOSTSFILE: evdns's record lookups ignore it; ours is read above. A
            // missing or empty resolv.conf leaves evdns's default, a server on 127.0.0.1.
            _ = evdns_base_resolv_conf_parse(evdns, DNS_OPTION_NAMESERVERS | DNS_OPTION_SEARCH | DNS_OPTION_MISC,
                                             configuration.resolvConf)
        }
        let seconds = Double(configuration.queryTimeout.components.seconds)
            + Double(configuration.queryTimeout.components.attoseconds) / 1e18
        evdns_base_set_option(evdns, "timeout", String(max(seconds, 0.001)))
        evdns_base_set_option(evdns, "attempts", String(max(configuration.attempts, 1)))
    }

    /// evdns writes "nameserver failed" warnings to stderr; every failure already reaches the
    /// caller as a `DNSError`, and the gateway's own log says what it means for requests.
    private static let quietLogs: Void = {
        evdns_set_log_fn { _, _ in }
    }()

    deinit {
        // The evdns base is freed without failing its queries (fail_requests 0): failing them
        // defers a callback per query to the loop's next iteration, which a stopping loop never
        // runs (the callbacks' records, the request handles and the lookups stayed behind:
        // `aResolverReleasedAsItsLoopStopsLeavesNoLookupBehind`). The lookups in flight are
        // abandoned instead, after the base (their waiters are dropped, as documented). It must
        // not race the loop thread nor follow event_base_free:
        // - the loop's base is gone: freeing would touch it; the evdns base is left behind;
        // - the loop is being deinitialized (weak reference already nil), or this is its
        //   thread (or it has not started): free now;
        // - otherwise (released on another thread): free on the loop thread.
        if isShutDown { return }
        let teardown = EVDNSTeardown(base: evdns, lookups: Array(inFlight.values))
        if lifetime.ended.load(ordering: .acquiring) {
            teardown.abandonLookups()
            return
        }
        guard let loop, !loop.isOwnedByCurrentThread else {
            teardown.run()
            return
        }
        loop.executeCleanup { teardown.run() }
    }

    /// Frees the evdns base at once, on the loop's thread after `run()` returned and before the
    /// loop's base goes (`EventLoop` calls it for every resolver made on it): lookups in flight
    /// are dropped without completing and what their queries held is released. A resolver still
    /// referenced once its loop stopped (a client released later, off the loop) then has nothing
    /// left to free; before, its evdns base and pending lookups stayed behind.
    func shutDown() {
        guard !isShutDown else { return }
        isShutDown = true
        EVDNSTeardown(base: evdns, lookups: Array(inFlight.values)).run()
        inFlight.removeAll()
    }

    /// Resolves `host` to one or more addresses, or a `DNSError`.
    public func resolve(_ host: String, completion: @escaping (Result<[IPAddress], DNSError>) -> Void) {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if let literal = IPAddress(name) {
            completion(.success([literal]))
            return
        }
        let key = name.lowercased()
        guard Self.isPlausibleName(key) else {
            completion(.failure(DNSError(host: host, code: DNS_ERR_FORMAT, reason: "not a valid host name")))
            return
        }
        if let listed = hosts.addresses(for: key) {
            completion(.success(listed))
            return
        }
        if let cached = cache[key] {
            if cached.expiry > .now {
                completion(.success(cached.addresses))
                return
            }
            cache[key] = nil
        }
        if let running = inFlight[key] {
            running.waiters.append(completion)
            return
        }
        guard !isShutDown else {
            completion(.failure(DNSError(host: host, code: DNS_ERR_SHUTDOWN, reason: "the resolver's loop has stopped")))
            return
        }
        let lookup = DNSLookup(name: key, resolver: self)
        lookup.waiters.append(completion)
        inFlight[key] = lookup
        lookup.start(on: evdns)
    }

    /// Drops the cached answer for `host`, so the next `resolve` queries again.
    public func forget(_ host: String) {
        cache[host.lowercased()] = nil
    }

    /// Called by a lookup once both queries answered.
    func finished(_ lookup: DNSLookup, _ result: Result<(addresses: [IPAddress], ttl: Int), DNSError>) {
        inFlight[lookup.name] = nil
        let waiters = lookup.waiters
        lookup.waiters = []
        switch result {
        case .success(let answer):
            let ttl = min(Duration.seconds(answer.ttl), configuration.maximumTTL)
            if ttl > .zero { cache[lookup.name] = (answer.addresses, .now + ttl) }
            for waiter in waiters { waiter(.success(answer.addresses)) }
        case .failure(let error):
            for waiter in waiters { waiter(.failure(error)) }
        }
    }

    /// Letters, digits, `-`, `_` and dots, at most 253 characters: anything else cannot be a
    /// DNS name and would only cost a round trip.
    private static func isPlausibleName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): true
            default: false
            }
        }
    }
}

/// Why a name did not resolve: the evdns error code and its text.
public struct DNSError: Error, Sendable, Hashable, CustomStringConvertible {
    public let host: String
    /// A `DNS_ERR_*` code (3: no such name, 67: timeout, 70: no records of that type).
    public let code: Int32
    public let reason: String

    public var description: String { "cannot resolve '\(host)': \(reason)" }

    /// The name does not exist, or has no A/AAAA records.
    public var isNotFound: Bool { code == DNS_ERR_NOTEXIST || code == DNS_ERR_NODATA }
}

extension EventLoop {
    /// The loop's shared resolver (system configuration), created on first use. Loop thread only.
    public var resolver: DNSResolver {
        if let existing = registered(DNSResolver.self) { return existing }
        // Only an unparsable configured name server can throw; the system configuration has none.
        let created = try! DNSResolver(loop: self)
        register(created)
        return created
    }
}

/// A resolver's evdns base and its lookups in flight, let go together: the base freed without
/// failing its queries (fail_requests 0: failing them defers callbacks to a loop iteration that
/// may never come), then the lookups abandoned. Carried to the loop thread when the resolver
/// goes elsewhere.
private struct EVDNSTeardown: @unchecked Sendable {
    // Invariant: run once, on the loop's thread (or once the loop stopped, or before it
    // started): the base and the lookups are loop-bound.
    let base: OpaquePointer
    let lookups: [DNSLookup]

    func run() {
        evdns_base_free(base, 0)
        abandonLookups()
    }

    /// Only the lookups: for a base whose event base is gone (freeing it would touch that).
    func abandonLookups() {
        for lookup in lookups { lookup.abandon() }
    }
}

/// Reads a whole (small) text file with the C library: this module does not link Foundation.
func readTextFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while bytes.count < 1 << 20 {
        let count = read(fd, &chunk, chunk.count)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes.append(contentsOf: chunk[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}
