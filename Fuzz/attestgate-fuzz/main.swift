import AGFuzzTargets
import Foundation

// The libFuzzer driver around one fuzz target. Built only by scripts/fuzz (AG_FUZZ=1, ASan,
// libFuzzer coverage, the runtime without main). SwiftPM renames an executable's entry point and defines `main` as
// an alias of it, so libFuzzer's own `main` is never linked: this top-level code runs instead
// and hands control to libFuzzer's `LLVMFuzzerRunDriver`. AG_FUZZ_TARGET chooses the target;
// AG_FUZZ_SEEDS names a directory to write the target's seeds into first.

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

let environment = ProcessInfo.processInfo.environment
guard let name = environment["AG_FUZZ_TARGET"], let chosen = FuzzTargets.named(name) else {
    FileHandle.standardError.write(Data("AG_FUZZ_TARGET must be one of: \(FuzzTargets.all.map(\.name).joined(separator: " "))\n".utf8))
    exit(2)
}
if let directory = environment["AG_FUZZ_SEEDS"] {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (index, seed) in chosen.seeds().enumerated() {
        FileManager.default.createFile(atPath: "\(directory)/seed-\(index)", contents: Data(seed))
    }
}

/// The target, read by the C callback (which cannot capture).
let target: FuzzTarget = chosen

var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    if let problem = target.run(input) {
        fatalError("fuzz target \(target.name): \(problem)")
    }
    return 0
})
