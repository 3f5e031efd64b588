import AGTestSupport
import Foundation
import Testing

/// `attestgate check-config` and `keygen` as an operator runs them.
@Suite("command line")
struct CommandLineTests {
    let binary = TestGateway.builtProductPath("attestgate")

    /// A copy of the shipped conf/ with what scripts/run creates beside it (.run/).
    func shippedConfig() throws -> String {
        let root = NSTemporaryDirectory() + "attestgate-cli-" + UUID().uuidString
        let shipped = URL(fileURLWithPath: TestGateway.fixturePath("")).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("conf").path
        try FileManager.default.createDirectory(atPath: root + "/.run/keys", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: shipped, toPath: root + "/conf")
        try "token\n".write(toFile: root + "/.run/admin-token", atomically: true, encoding: .utf8)
        return root
    }

    @Test func checkConfigAcceptsTheShippedConfigurationAndReportsProblemsByLine() throws {
        let root = try shippedConfig()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let missingKey = try runProgram(binary, ["check-config", root + "/conf"], mergingErrors: true)
        #expect(missingKey.status == 1)
        #expect(String(decoding: missingKey.output, as: UTF8.self).contains("tokens.keys[0].file"))

        let keygen = try runProgram(binary, ["keygen", "--algorithm", "ES256", "--out", root + "/.run/keys/dev-es256-1.pem"])
        #expect(keygen.status == 0)
        let again = try runProgram(binary, ["keygen", "--out", root + "/.run/keys/dev-es256-1.pem"], mergingErrors: true)
        #expect(again.status == 1, "keygen never overwrites a key")

        let ok = try runProgram(binary, ["check-config", root + "/conf"], mergingErrors: true)
        #expect(ok.status == 0, "\(String(decoding: ok.output, as: UTF8.self))")
        // A second operand is refused (it was ignored, with "configuration OK" and 0).
        let two = try runProgram(binary, ["check-config", root + "/conf", "/nonexistent"], mergingErrors: true)
        #expect(two.status == 2)
        #expect(String(decoding: two.output, as: UTF8.self).hasPrefix("check-config takes one configuration"))

        try "team_id: ABCDE12345\nbundle_id: com.other.app\nroutes:\n  - prefix: /api/\n    auth: maybe\n"
            .write(toFile: root + "/conf/tenants/broken.yaml", atomically: true, encoding: .utf8)
        let broken = try runProgram(binary, ["check-config", root + "/conf"], mergingErrors: true)
        #expect(broken.status == 1)
        let text = String(decoding: broken.output, as: UTF8.self)
        #expect(text.contains("broken.yaml:5: routes[0].auth:"), "\(text)")
    }

    /// The two listeners are bound side by side at start: check-config and serve refuse a pair
    /// that would collide, naming both keys, where serve stopped at "Address already in use".
    @Test func overlappingListenersAreRefusedByCheckConfigAndServe() throws {
        let root = try shippedConfig()
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(try runProgram(binary, ["keygen", "--out", root + "/.run/keys/dev-es256-1.pem"]).status == 0)
        let path = root + "/conf/gateway.yaml"
        let shipped = try String(contentsOfFile: path, encoding: .utf8)
        try shipped.replacingOccurrences(of: #"listen: "127.0.0.1:9901""#, with: #"listen: "127.0.0.1:8080""#)
            .write(toFile: path, atomically: true, encoding: .utf8)
        let expected = path + #":50: admin.listen: "127.0.0.1:8080" overlaps server.listen "0.0.0.0:8080" (line 11): "#
            + "0.0.0.0 takes port 8080 on every IPv4 address; give each listener a port of its own"
        for arguments in [["check-config", path], ["serve", "--config", path]] {
            let run = try runProgram(binary, arguments, mergingErrors: true)
            let text = String(decoding: run.output, as: UTF8.self)
            #expect(run.status == 1, "\(arguments[0]): \(text)")
            #expect(text.split(separator: "\n").contains { $0 == expected }, "\(arguments[0]): \(text)")
        }
    }
}
