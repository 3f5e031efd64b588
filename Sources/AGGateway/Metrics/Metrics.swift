import AGSync

/// Prometheus counters and histograms shared by all workers.
///
/// Each worker records into its own `WorkerMetrics` (its mutex is uncontended but for scrapes);
/// a scrape merges them.
public final class MetricsRegistry: Sendable {
    private let workers: Locked<[WorkerMetrics]> = Locked([])
    private let global = Locked<[String: Int]>([:])

    public init() {}

    func makeWorkerMetrics() -> WorkerMetrics {
        let metrics = WorkerMetrics()
        workers.withLock { $0.append(metrics) }
        return metrics
    }

    /// Counts a process-wide event, e.g. `attestgate_config_reloads_total{result="ok"}`.
    func increment(_ series: String, by amount: Int = 1) {
        global.withLock { $0[series, default: 0] += amount }
    }

    /// Series shown from the start, at 0 until counted: the counters without labels, and the
    /// reload results. A counter first scraped at 1 is invisible to `increase()` and `rate()`,
    /// so an alert on the first Redis error or store reset would never fire. Labelled
    /// per-tenant series appear with their first count.
    static let exposedFromStart = [
        redisErrors, storeResets, HotCounter.tokenCacheHits.series, HotCounter.tokenCacheMisses.series, reloadsOK, reloadsRejected,
    ]

    /// The series counted at several places, named once (the list above and every increment).
    static let redisErrors = "attestgate_redis_errors_total"
    static let storeResets = "attestgate_store_resets_total"
    static let reloadsOK = "attestgate_config_reloads_total{result=\"ok\"}"
    static let reloadsRejected = "attestgate_config_reloads_total{result=\"rejected\"}"

    /// Prometheus text exposition format 0.0.4.
    public func render() -> String {
        var counters: [String: Int] = global.withLock { $0 }
        for series in Self.exposedFromStart { counters[series, default: 0] += 0 }
        var buckets = [Int](repeating: 0, count: WorkerMetrics.latencyBounds.count + 1)
        var latencySum = 0.0
        var latencyCount = 0
        for worker in workers.withLock({ $0 }) {
            worker.state.withLock { state in
                for (series, value) in state.counters { counters[series, default: 0] += value }
                for counter in HotCounter.allCases where state.hot[counter.rawValue] > 0 {
                    counters[counter.series, default: 0] += state.hot[counter.rawValue]
                }
                for (request, slot) in state.requestSlots { counters[request.series, default: 0] += state.requestCounts[slot] }
                for (index, value) in state.latencyBuckets.enumerated() { buckets[index] += value }
                latencySum += state.latencySum
                latencyCount += state.latencyCount
            }
        }
        var out = ""
        var lastName = ""
        for series in counters.keys.sorted() {
            let name = String(series.prefix { $0 != "{" })
            if name != lastName {
                out += "# TYPE \(name) counter\n"
                lastName = name
            }
            out += "\(series) \(counters[series]!)\n"
        }
        out += "# TYPE attestgate_request_duration_seconds histogram\n"
        var cumulative = 0
        for (index, bound) in WorkerMetrics.latencyBounds.enumerated() {
            cumulative += buckets[index]
            out += "attestgate_request_duration_seconds_bucket{le=\"\(bound)\"} \(cumulative)\n"
        }
        cumulative += buckets[WorkerMetrics.latencyBounds.count]
        out += "attestgate_request_duration_seconds_bucket{le=\"+Inf\"} \(cumulative)\n"
        out += "attestgate_request_duration_seconds_sum \(latencySum)\n"
        out += "attestgate_request_duration_seconds_count \(latencyCount)\n"
        return out
    }
}

/// One worker's metrics. Recorded on the worker's loop; read by scrapes.
final class WorkerMetrics: MetricsSink, Sendable {
    static let latencyBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    /// The labels of `attestgate_requests_total`, kept apart so that counting a request builds
    /// no series string (rendered only when scraped).
    struct RequestLabels: Hashable {
        let tenant: String
        let route: String
        let status: Int
        let code: String?

        var series: String {
            "attestgate_requests_total{tenant=\"\(tenant)\",route=\"\(route)\",status=\"\(status)\",code=\"\(code ?? "")\"}"
        }

        func matches(tenant: String, route: String, status: Int, code: String?) -> Bool {
            self.status == status && self.tenant == tenant && self.route == route && self.code == code
        }
    }

    struct State {
        var counters: [String: Int] = [:]
        var hot = [Int](repeating: 0, count: HotCounter.allCases.count)
        /// Each request series' slot in `requestCounts`.
        var requestSlots: [RequestLabels: Int] = [:]
        var requestCounts: [Int] = []
        var lastLabels: RequestLabels?
        var lastSlot = 0
        var latencyBuckets = [Int](repeating: 0, count: WorkerMetrics.latencyBounds.count + 1)
        var latencySum = 0.0
        var latencyCount = 0
    }

    let state = Locked(State())

    func increment(_ series: String, by amount: Int) {
        state.withLock { $0.counters[series, default: 0] += amount }
    }

    func increment(_ counter: HotCounter) {
        state.withLock { $0.hot[counter.rawValue] += 1 }
    }

    /// Counts one answered request and its latency.
    func recordRequest(tenant: String, route: String, status: Int, code: String?, seconds: Double) {
        let bucket = Self.latencyBounds.firstIndex { seconds <= $0 } ?? Self.latencyBounds.count
        state.withLock { state in
            // A busy worker answers run after run of requests with the same labels: the last
            // series' labels are compared in place (strings that share storage compare at
            // once) before the dictionary hashes four fields. Labels are built only for a new
            // run: building them per request, comparing and keeping a copy retained and
            // released their three strings twice (~250 instructions).
            if state.lastLabels?.matches(tenant: tenant, route: route, status: status, code: code) == true {
                state.requestCounts[state.lastSlot] += 1
            } else {
                let labels = RequestLabels(tenant: tenant, route: route, status: status, code: code)
                let slot = state.requestSlots[labels] ?? {
                    state.requestCounts.append(0)
                    state.requestSlots[labels] = state.requestCounts.count - 1
                    return state.requestCounts.count - 1
                }()
                state.requestCounts[slot] += 1
                state.lastLabels = labels
                state.lastSlot = slot
            }
            state.latencyBuckets[bucket] += 1
            state.latencySum += seconds
            state.latencyCount += 1
        }
    }
}
