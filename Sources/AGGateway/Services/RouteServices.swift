import AGConfig
import AGCrypto
import AGFormats
import AGHTTP
import AGPolicy

/// Everything a request handler may use, handed in as one value (Hummingbird's request
/// context): small protocols, so the routers run in process against in-memory fakes
/// (`Tests/AGGatewayTests/Harness`) as well as against Redis and real upstreams (`Worker`).
///
/// Loop thread only: one instance per worker, built when the worker starts. A class, so a
/// request holds it with one reference count instead of copying twenty existentials.
final class RouteServices {
    /// The snapshot in force; a request reads it once, when it starts.
    let snapshots: any SnapshotSource
    /// "Now" for every decision (scripts, tokens, months).
    let time: any TimeSource
    let devices: any DeviceRecords
    let deviceAdmin: any DeviceAdministration
    let challenges: any ChallengeIssuer
    /// Platform SSO nonces, refresh families and devices.
    let platformSSO: any PlatformSSOStore
    let limiter: any Limiter
    let tiers: any TierAdministration
    let revocations: any RevocationState
    let forwarder: any Forwarder
    let readiness: any StoreHealth
    let reloader: any ConfigReloader
    let metrics: any MetricsSink
    /// The Prometheus text of the whole instance (`GET /metrics`).
    let metricsText: () -> String
    let logger: any LogSink
    let accessLog: any AccessLogSink
    /// Signature-verified proxy tokens, so a repeated token costs no signature check.
    let tokenCache: TokenCache
    /// Parsed device keys, so a refresh costs no key import.
    let deviceKeys: DeviceKeyCache
    let requestIDs: RequestIDSource
    /// Unpredictable values that are not keys (token ids, Platform SSO refresh tokens and JWE
    /// IVs; the worker's challenge and nonce stores share it), a block of OpenSSL's DRBG at a time.
    let random: SecureRandomBuffer

    init(snapshots: any SnapshotSource,
         time: any TimeSource,
         devices: any DeviceRecords,
         deviceAdmin: any DeviceAdministration,
         challenges: any ChallengeIssuer,
         platformSSO: any PlatformSSOStore,
         limiter: any Limiter,
         tiers: any TierAdministration,
         revocations: any RevocationState,
         forwarder: any Forwarder,
         readiness: any StoreHealth,
         reloader: any ConfigReloader,
         metrics: any MetricsSink,
         metricsText: @escaping () -> String,
         logger: any LogSink,
         accessLog: any AccessLogSink,
         tokenCache: TokenCache,
         deviceKeys: DeviceKeyCache,
         requestIDs: RequestIDSource,
         random: SecureRandomBuffer) {
        self.snapshots = snapshots
        self.time = time
        self.devices = devices
        self.deviceAdmin = deviceAdmin
        self.challenges = challenges
        self.platformSSO = platformSSO
        self.limiter = limiter
        self.tiers = tiers
        self.revocations = revocations
        self.forwarder = forwarder
        self.readiness = readiness
        self.reloader = reloader
        self.metrics = metrics
        self.metricsText = metricsText
        self.logger = logger
        self.accessLog = accessLog
        self.tokenCache = tokenCache
        self.deviceKeys = deviceKeys
        self.requestIDs = requestIDs
        self.random = random
    }
}

/// A store call that could not be answered: Redis down or slow, or a reply of the wrong shape.
struct StoreFailure: Error, CustomStringConvertible {
    let description: String
}

/// Reads the configuration snapshot in force.
protocol SnapshotSource {
    var snapshot: GatewaySnapshot { get }
}

/// Takes rate-limit tokens (`RateLimiter` on Redis with its fallback).
protocol Limiter: AnyObject {
    /// Takes one token from every bucket of `checks` in one store call (all or none).
    /// Completes exactly once on the loop thread, possibly before returning.
    func check(_ checks: [BucketCheck], fallback: RateLimitFallback, completion: @escaping (RateLimitOutcome) -> Void)
    /// Takes one token of `check` from this worker's lease of it (the proxied `api` bucket);
    /// the lease call also reads the tenant's device epoch at `epochKey`.
    func lease(_ check: BucketCheck, epochKey: String, fallback: RateLimitFallback, completion: @escaping (RateLimitOutcome) -> Void)
    /// A proxied request with a token: the device record must exist and not be revoked, then
    /// `check` (the `api` bucket) decides. No Redis call when the token's device was found in
    /// good standing at the tenant's current device epoch and the lease has a token; else one
    /// round trip for the record (and one for the lease when it is due). Completes exactly
    /// once on the loop thread.
    func admit(_ check: BucketCheck, device: DeviceCheck, fallback: RateLimitFallback,
               completion: @escaping (DeviceAdmission) -> Void)
    /// `admit`'s answer when it needs no Redis call (the steady state of a proxied request),
    /// decided and spent at once; nil when `admit` must be called. Nil by default.
    func admitNow(_ check: BucketCheck, device: DeviceCheck) -> DeviceAdmission?
}

extension Limiter {
    func admitNow(_ check: BucketCheck, device: DeviceCheck) -> DeviceAdmission? { nil }
}

/// A proxied token's device, as `Limiter.admit` checks it.
struct DeviceCheck {
    /// `ag:{APPID}:dev:<keyId>`.
    let deviceKey: String
    /// `ag:{APPID}:devepoch` (`DeviceEpoch`).
    let epochKey: String
    /// The tenant device epoch at which this worker last found the record in good standing
    /// (kept on the cached token); nil when never.
    let checkedAt: String?
}

/// What `Limiter.admit` found.
enum DeviceAdmission: Equatable {
    /// The device record says revoked, or is gone: refuse like a revocation.
    case refused(AdmissionScripts.DeviceStanding)
    /// The device is in good standing at `epoch` (for the token to remember; nil when the
    /// bucket refused before the record could be read again); the bucket decided.
    case checked(RateLimitOutcome, epoch: String?)
    /// Redis could not answer: the device is unchecked, the bucket followed its fallback.
    case unverified(RateLimitOutcome)
}

/// Issues single-use challenges.
protocol ChallengeIssuer: AnyObject {
    /// Takes a token from every bucket of `buckets` (all or none) and, when each had one,
    /// issues a challenge valid for `ttl`: the outcome for the rate-limit headers and 429,
    /// and the challenge exactly when the outcome is `.allowed`. A failure is a 503.
    func issue(tenant: Tenant, ttl: Duration, buckets: [BucketCheck],
               completion: @escaping (Result<(RateLimitOutcome, IssuedChallenge?), StoreFailure>) -> Void)
}

/// A challenge and the time it was issued (Unix ms).
struct IssuedChallenge: Equatable {
    let challenge: String
    let issuedAtMilliseconds: Int64
}

/// Is the shared store answering (`/readyz`), and has it lost its data (`StoreEpoch`)?
protocol StoreHealth: AnyObject {
    func check(completion: @escaping (Bool) -> Void)
    /// Store resets noticed and not yet acknowledged, oldest first.
    var unacknowledgedResets: [StoreEpoch.Reset] { get }
    /// Clears them (`POST /admin/v1/store/acknowledge-reset`); returns how many there were.
    func acknowledgeResets() -> Int
}

extension StoreHealth {
    var unacknowledgedResets: [StoreEpoch.Reset] { [] }
    func acknowledgeResets() -> Int { 0 }
}

/// Reloads the configuration off the loop and answers on it (`POST /admin/v1/reload`).
protocol ConfigReloader: AnyObject {
    func reload(completion: @escaping (Result<Int, ConfigError>) -> Void)
}

/// Counters and the request histogram (`WorkerMetrics`).
protocol MetricsSink: AnyObject {
    func increment(_ series: String, by amount: Int)
    func recordRequest(tenant: String, route: String, status: Int, code: String?, seconds: Double)
    /// Counts one event of a per-request counter (`HotCounter`): no series string is hashed.
    func increment(_ counter: HotCounter)
}

extension MetricsSink {
    func increment(_ series: String) { increment(series, by: 1) }
    func increment(_ counter: HotCounter) { increment(counter.series, by: 1) }
}

/// Counters bumped on every proxied request, kept in fixed slots by `WorkerMetrics` and
/// rendered under their series names.
enum HotCounter: Int, CaseIterable {
    case tokenCacheHits
    case tokenCacheMisses

    var series: String {
        switch self {
        case .tokenCacheHits: "attestgate_token_cache_hits_total"
        case .tokenCacheMisses: "attestgate_token_cache_misses_total"
        }
    }
}

/// Structured log lines (`Logger`).
protocol LogSink: Sendable {
    func log(_ level: Logger.Level, _ message: String, _ fields: [(String, LogValue)])
    /// A line that may repeat at request rate (a store outage): `ThrottledLogSink` writes one
    /// per `key` and interval with a `suppressed` count; other sinks write every line.
    func logRepeated(_ level: Logger.Level, _ message: String, key: String, _ fields: [(String, LogValue)])
}

extension LogSink {
    func logRepeated(_ level: Logger.Level, _ message: String, key: String, _ fields: [(String, LogValue)]) {
        log(level, message, fields)
    }

    func debug(_ message: String, _ fields: [(String, LogValue)] = []) { log(.debug, message, fields) }
    func info(_ message: String, _ fields: [(String, LogValue)] = []) { log(.info, message, fields) }
    func warn(_ message: String, _ fields: [(String, LogValue)] = []) { log(.warn, message, fields) }
    func error(_ message: String, _ fields: [(String, LogValue)] = []) { log(.error, message, fields) }
}

extension Logger: LogSink {}

/// Where access-log lines go (`AccessLogBuffer`).
protocol AccessLogSink: AnyObject {
    /// Appends the line of one answered request.
    func appendAccess(_ line: AccessLine)
}

/// The fields of one request's access-log line, in the order they are written.
struct AccessLine {
    var unixMilliseconds: Int64
    var requestID: RequestIdentifier
    var method: String
    var path: Substring
    var tenant: String
    var route: String
    var status: Int
    var code: String?
    /// Milliseconds with microsecond precision, written as `durationMs` (`0.173`).
    var durationMicroseconds: Int
    var upstreamMicroseconds: Int?
    var client: String
}

/// New request ids for one worker (unique, not secret).
final class RequestIDSource {
    private var generator = RequestIDGenerator()

    /// The client's id when it is sane, else a fresh one.
    func resolve(_ offered: String?) -> RequestIdentifier {
        if let offered, RequestID.isSane(offered) { return RequestIdentifier(offered) }
        return RequestIdentifier(RequestID.newUUIDText(using: &generator))
    }
}
