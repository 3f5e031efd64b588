import AGConfig
import AGFormats
import AGPolicy
import AGSync

@testable import AGGateway

/// In-memory stand-ins for the services handlers use. Each answers at once (the router then
/// finishes within `handle`) with what the test scripted, and records what it was asked.

final class FakeDevices: DeviceRecords, DeviceAdministration {
    var prepareRefreshReply: Result<(RateLimitOutcome, RefreshPrepared), StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var commitRefreshReply: Result<CommitOutcome, StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var prepareAttestationReply: Result<AttestationPrepared, StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var commitAttestationReply: Result<CommitOutcome, StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var records: [String: DeviceRecord] = [:]
    var usageReply = DeviceUsage(month: "202612", activeDevices: 0, graceStartedMilliseconds: nil)
    var failAdmin = false

    private(set) var preparedRefreshes: [RefreshPreparation] = []
    private(set) var committedRefreshes: [RefreshCommit] = []
    private(set) var invalidated: [String] = []
    private(set) var preparedAttestations: [AttestationPreparation] = []
    private(set) var committedAttestations: [AttestationCommit] = []
    private(set) var imported: [ImportedDeviceKey] = []
    private(set) var revoked: [String] = []
    private(set) var subscriptions: [String: String] = [:]

    /// Every call that would have changed state.
    var writes: Int {
        preparedRefreshes.count + committedRefreshes.count + invalidated.count + preparedAttestations.count
            + committedAttestations.count + imported.count + revoked.count + subscriptions.count
    }

    func prepareRefresh(_ request: RefreshPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, RefreshPrepared), StoreFailure>) -> Void) {
        preparedRefreshes.append(request)
        completion(prepareRefreshReply)
    }

    func commitRefresh(_ request: RefreshCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void) {
        committedRefreshes.append(request)
        completion(commitRefreshReply)
    }

    func invalidate(tenant: Tenant, keyID: String, publicKey: [UInt8], counter: UInt32,
                    completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        invalidated.append(keyID)
        completion(.success(true))
    }

    func prepareAttestation(_ request: AttestationPreparation,
                            completion: @escaping (Result<AttestationPrepared, StoreFailure>) -> Void) {
        preparedAttestations.append(request)
        completion(prepareAttestationReply)
    }

    func commitAttestation(_ request: AttestationCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void) {
        committedAttestations.append(request)
        completion(commitAttestationReply)
    }

    func importKey(_ key: ImportedDeviceKey, completion: @escaping (Result<Void, StoreFailure>) -> Void) {
        guard !failAdmin else { return completion(.failure(StoreFailure(description: "down"))) }
        imported.append(key)
        completion(.success(()))
    }

    func read(tenant: Tenant, keyID: String, completion: @escaping (Result<DeviceRecord?, StoreFailure>) -> Void) {
        guard !failAdmin else { return completion(.failure(StoreFailure(description: "down"))) }
        completion(.success(records[keyID]))
    }

    func revoke(tenant: Tenant, keyID: String, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        guard !failAdmin else { return completion(.failure(StoreFailure(description: "down"))) }
        guard records[keyID] != nil else { return completion(.success(false)) }
        revoked.append(keyID)
        completion(.success(true))
    }

    func setSubscription(tenant: Tenant, subjectID: String, json: String, completion: @escaping (Result<Void, StoreFailure>) -> Void) {
        guard !failAdmin else { return completion(.failure(StoreFailure(description: "down"))) }
        subscriptions[subjectID] = json
        completion(.success(()))
    }

    func usage(tenant: Tenant, completion: @escaping (Result<DeviceUsage, StoreFailure>) -> Void) {
        guard !failAdmin else { return completion(.failure(StoreFailure(description: "down"))) }
        completion(.success(usageReply))
    }
}

/// Takes the buckets from in-process token buckets on the harness clock (all or none, like
/// the Redis store), then answers `reply` when they all had a token.
final class FakeChallenges: ChallengeIssuer {
    let buckets: LocalBuckets
    var reply: Result<IssuedChallenge, StoreFailure> = .success(IssuedChallenge(challenge: "c", issuedAtMilliseconds: 0))
    private(set) var issued = 0
    private(set) var checked: [[BucketCheck]] = []

    init(time: any TimeSource) {
        buckets = LocalBuckets(time: time)
    }

    func issue(tenant: Tenant, ttl: Duration, buckets checks: [BucketCheck],
               completion: @escaping (Result<(RateLimitOutcome, IssuedChallenge?), StoreFailure>) -> Void) {
        checked.append(checks)
        if case .failure(let failure) = reply { return completion(.failure(failure)) }
        let (allowed, decisions) = buckets.take(checks)
        let outcome = RateLimitOutcome.combining(checks, allowed: allowed, decisions)
        guard allowed, case .success(let challenge) = reply else { return completion(.success((outcome, nil))) }
        issued += 1
        completion(.success((outcome, challenge)))
    }
}

/// Answers every check from in-process token buckets on the harness clock, like
/// `LocalBuckets`; `unavailable` makes it behave like a limiter whose Redis is down. Device
/// records named (by keyId) in `revoked` or `missing` are refused by `admit`. `epoch` plays the
/// tenants' device epoch: a token found in good standing at it is not looked up again until a
/// test moves it (as a revocation does in Redis).
final class FakeLimiter: Limiter {
    let buckets: LocalBuckets
    var unavailable = false
    var revoked: Set<String> = []
    var missing: Set<String> = []
    var epoch = 1
    private(set) var checked: [[BucketCheck]] = []
    /// The device keys `admit` read, in order (a token current at `epoch` is not read).
    private(set) var deviceChecks: [String] = []

    init(time: any TimeSource) {
        buckets = LocalBuckets(time: time)
    }

    func check(_ checks: [BucketCheck], fallback: RateLimitFallback, completion: @escaping (RateLimitOutcome) -> Void) {
        checked.append(checks)
        if unavailable {
            switch fallback {
            case .refuse: return completion(.storeUnavailable)
            case .allow: return completion(.allowed(nil))
            case .local: break
            }
        }
        let (allowed, decisions) = buckets.take(checks)
        completion(.combining(checks, allowed: allowed, decisions))
    }

    func lease(_ check: BucketCheck, epochKey: String, fallback: RateLimitFallback, completion: @escaping (RateLimitOutcome) -> Void) {
        self.check([check], fallback: fallback, completion: completion)
    }

    func admit(_ check: BucketCheck, device: DeviceCheck, fallback: RateLimitFallback,
               completion: @escaping (DeviceAdmission) -> Void) {
        // Down, every token counts as unchecked: the epoch cannot be known to be current.
        if unavailable {
            return self.check([check], fallback: fallback) { completion(.unverified($0)) }
        }
        let current = String(epoch)
        if device.checkedAt != current {
            deviceChecks.append(device.deviceKey)
            let keyID = String(device.deviceKey.split(separator: ":").last ?? "")
            if revoked.contains(keyID) { return completion(.refused(.revoked)) }
            if missing.contains(keyID) { return completion(.refused(.unknown)) }
        }
        self.check([check], fallback: fallback) { completion(.checked($0, epoch: current)) }
    }
}

final class FakeTiers: TierAdministration {
    var overrides: [String: String] = [:]

    func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier {
        fileTiers[overrides[appID] ?? fileTier] ?? RateTier.builtIn["free"]!
    }

    func tenantTierOverride(appID: String) -> String? { overrides[appID] }

    func effectiveTiers(fileTiers: [String: RateTier]) -> [String: RateTier] { fileTiers }

    func setTenantTier(appID: String, tier: String, fileTiers: [String: RateTier],
                       completion: @escaping (Result<Void, TierChangeError>) -> Void) {
        guard fileTiers[tier] != nil else { return completion(.failure(.unknownTier(tier))) }
        overrides[appID] = tier
        completion(.success(()))
    }

    func clearTenantTier(appID: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        completion(.success(overrides.removeValue(forKey: appID) != nil))
    }

    func setTier(name: String, numbers: TierNumbers, fileTiers: [String: RateTier],
                 completion: @escaping (Result<RateTier, TierChangeError>) -> Void) {
        guard let tier = numbers.tier(named: name, over: fileTiers[name]) else {
            return completion(.failure(.invalidNumbers("missing numbers")))
        }
        completion(.success(tier))
    }

    func clearTier(name: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        completion(.success(false))
    }

    func runtimeNumbers(tier name: String) -> TierNumbers? { nil }
    func runtimeNumbersWithoutTier(fileTiers: [String: RateTier]) -> [String: TierNumbers] { [:] }
}

final class FakeRevocations: RevocationState {
    /// keyIds this worker "heard" were revoked.
    var known: Set<String> = []

    func isRevoked(appID: String, keyID: String) -> Bool { known.contains(keyID) }
}

/// Stands in for the upstream: records what would be forwarded and answers 200.
final class FakeForwarder: Forwarder {
    private(set) var forwarded: [(tenant: String, injected: [(name: String, value: String)])] = []

    func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, injected: InjectedHeaders) {
        forwarded.append((tenant.appID, injected.fields))
        context.respond(status: 200, json: #"{"upstream":true}"#)
    }
}

final class FakeHealth: StoreHealth {
    var healthy = true
    func check(completion: @escaping (Bool) -> Void) { completion(healthy) }
}

final class FakeReloader: ConfigReloader {
    var reply: Result<Int, ConfigError> = .success(2)
    private(set) var reloads = 0

    func reload(completion: @escaping (Result<Int, ConfigError>) -> Void) {
        reloads += 1
        completion(reply)
    }
}

final class RecordingMetrics: MetricsSink {
    private(set) var counters: [String: Int] = [:]
    private(set) var requests: [(route: String, status: Int, code: String?)] = []

    func increment(_ series: String, by amount: Int) { counters[series, default: 0] += amount }

    func recordRequest(tenant: String, route: String, status: Int, code: String?, seconds: Double) {
        requests.append((route, status, code))
    }
}

final class RecordingLog: LogSink {
    private let lines = Locked<[String]>([])

    func log(_ level: Logger.Level, _ message: String, _ fields: [(String, LogValue)]) {
        let rendered = ([message] + fields.map { "\($0.0)=\($0.1.text)" }).joined(separator: " ")
        lines.withLock { $0.append(rendered) }
    }

    var all: [String] { lines.withLock { $0 } }
}

/// Records each line spelled field by field through `JSONObjectWriter`: the reference that
/// `AccessLogBuffer`'s fragments are compared with.
final class RecordingAccessLog: AccessLogSink {
    private(set) var lines: [String] = []
    func appendAccess(_ line: AccessLine) {
        var json = JSONObjectWriter()
        json.add("ts", UTCDateTime(unixMilliseconds: line.unixMilliseconds), fractional: true)
        json.add("type", "access")
        json.add("requestId", line.requestID.description)
        json.add("method", line.method)
        json.add("path", line.path)
        json.add("tenant", line.tenant)
        json.add("route", line.route)
        json.add("status", line.status)
        json.add("code", line.code)
        json.add("durationMs", thousandths: line.durationMicroseconds)
        if let upstream = line.upstreamMicroseconds { json.add("upstreamMs", thousandths: upstream) }
        json.add("client", line.client)
        lines.append(json.finished())
    }
}
