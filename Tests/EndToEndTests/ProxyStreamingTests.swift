import AGTestSupport
import Foundation
import Testing

/// Large bodies through the real binary: they stream, so the gateway's memory stays flat.
@Suite("proxy streaming through the real binary")
struct ProxyStreamingTests {
    /// On its own threads: it holds ~150 MB in this process (the 48 MB body, the upstream's
    /// record of it, the download) and must never run beside UpstreamPoolTests' bounds on this
    /// process's memory (`.onOwnThreads(exclusive: true)`): in two whole runs they failed with
    /// 60–90 MB of growth while it ran beside them (alone they grow by ~1.5 MB).
    @Test(.onOwnThreads) func largeUploadsAndDownloadsStreamWithBoundedMemory() throws {
        let size = 48 << 20
        let big = [UInt8](repeating: 0x61, count: size)
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        upstream.reply { record in
            record.target.hasSuffix("/download")
                ? UpstreamReply(status: 200, headers: [("Content-Type", "application/octet-stream")], body: big)
                : UpstreamReply(status: 200, headers: [("Content-Type", "text/plain")], body: Array(String(record.body.count).utf8))
        }
        let teamID = TestGateway.randomTeamID()
        let harness = try TestGateway(tenants: ["a.yaml": ProxyFixture.tenantYAML(teamID: teamID, upstreamPort: upstream.port)],
                                      workers: 1)
        harness.stop()
        let gateway = try GatewayProcess(configPath: harness.directory + "/gateway.yaml",
                                         environment: TestBuild.memoryMeasurementEnvironment)
        defer { gateway.signal(SIGTERM) }
        let headers = [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")]
        let client = try HTTPTestClient(port: gateway.port, timeoutSeconds: 60)
        #expect(try client.request("GET", "/public/warm-up", headers: headers).status == 200)
        let baseline = gateway.residentBytes()
        #expect(baseline > 0)

        let upload = try client.request("POST", "/public/upload", headers: headers, body: big)
        #expect(upload.status == 200)
        #expect(upload.text == String(size), "the upstream received every byte")
        let afterUpload = gateway.residentBytes()

        let download = try client.request("GET", "/public/download", headers: headers)
        #expect(download.status == 200)
        #expect(download.body.count == size)
        let afterDownload = gateway.residentBytes()

        // 48 MiB went through each way; buffering it would show up here (under a sanitizer
        // too: its allowance is below the 48 MiB a buffered body would add).
        let bound = (24 << 20) + TestBuild.residentAllowance
        #expect(afterUpload - baseline < bound, "upload grew RSS by \(afterUpload - baseline) bytes")
        #expect(afterDownload - baseline < bound, "download grew RSS by \(afterDownload - baseline) bytes")
    }
}
