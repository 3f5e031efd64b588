import AGTestSupport
import Foundation
import Testing

/// Issue 9 item 1: a reload that changes a setting read only at startup says so, key by key,
/// instead of ignoring it silently; settings that apply at once say nothing.
@Suite("reload: restart-only settings are named")
struct RestartOnlySettingsTests {
    @Test func aReloadNamesEveryRestartOnlySettingItChanges() throws {
        let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { read: 30s, write: 30s, idle: 60s }\n"))
        let path = probe.gateway.directory + "/gateway.yaml"
        let original = try TestFile.text(path)
        var yaml = original
        let changes = [
            ("timeouts: { read: 30s, write: 30s, idle: 60s }",
             "timeouts: { read: 5s, write: 6s, idle: 7s, upstream_response: 9s, header: 4s, body_min_rate: 100, body_rate_window: 3s }\n  max_connections: 50"),
            ("timeout: 250ms", "timeout: 400ms\n  wait_replicas: 1\n  wait_timeout: 50ms"),
            ("level: debug", "level: info\n  format: text\n  access_log: false"),
            ("ip_limits:", "tenants_dir: keys\nip_limits:"),
        ]
        for (old, new) in changes {
            try #require(yaml.contains(old), "\(old) in \(yaml)")
            yaml = yaml.replacingOccurrences(of: old, with: new)
        }
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let tenant = try TestFile.text(probe.gateway.directory + "/tenants/t.yaml")
        try tenant.write(toFile: probe.gateway.directory + "/keys/t.yaml", atomically: true, encoding: .utf8)
        let reloaded = try probe.gateway.admin("POST", "/admin/v1/reload")
        #expect(reloaded.status == 200, "\(reloaded.text)")

        let named = probe.logLines("setting changed on reload takes effect after a restart").compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object["key"] as? String
        }
        // (server.timeouts.tls_handshake: TLSListenerEndToEndTests, it needs server.tls.)
        #expect(Set(named) == ["server.timeouts.read", "server.timeouts.write", "server.timeouts.idle",
                               "server.timeouts.header", "server.timeouts.body_min_rate", "server.timeouts.body_rate_window",
                               "server.max_connections", "redis.timeout", "redis.wait_replicas", "redis.wait_timeout", "log.level", "log.format", "tenants_dir"],
                "\(named)")
        #expect(named.count == 13, "each once")
        // Applied at once, so not named: the upstream timeout and the access log switch.
        #expect(!named.contains("server.timeouts.upstream_response"))
        #expect(!named.contains("log.access_log"))

        // Compared with what the process runs with, not with the previous file (stop 32, an
        // independent sweep): still changed at the next reload, named again; changed back, not
        // named (it was, falsely, as a change from the reloaded values).
        let warning = "setting changed on reload takes effect after a restart"
        #expect(try probe.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(probe.logLines(warning).count == 26, "the 13 still changed are named again")
        try original.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try probe.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(probe.logLines(warning).count == 26, "changed back: nothing to name")
    }
}
