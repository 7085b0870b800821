import Foundation
import SSHAgentProtocol

// A libFuzzer target over the agent's message parser (`make fuzz`): any bytes must parse or be refused, never
// crash, and a parsed request re-read from the same bytes must be the same request.

@_cdecl("LLVMFuzzerTestOneInput")
public func agentMessageFuzz(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let request = try? AgentRequest.parse(bytes) {
        precondition((try? AgentRequest.parse(bytes)) == request, "parsing is not deterministic")
    }
    return 0
}

#if FUZZING
// SwiftPM links an executable's entry point as `<target>_main`; under libFuzzer that entry hands over to its driver.
@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("agent_message_fuzz_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { agentMessageFuzz($0, $1) }
}
#else
/// Without libFuzzer: runs the target over the files named on the command line (or the seed corpus), so the seeds
/// stay a regression test of the parser.
@main
struct CorpusRunner {
    static func main() throws {
        var paths = Array(CommandLine.arguments.dropFirst())
        if paths.isEmpty { paths = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().path + "/Corpus"] }
        var count = 0
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            let files =
                isDirectory.boolValue
                ? try FileManager.default.contentsOfDirectory(atPath: path).map { path + "/" + $0 } : [path]
            for file in files {
                let data = try Data(contentsOf: URL(fileURLWithPath: file))
                _ = data.withUnsafeBytes { agentMessageFuzz($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
                count += 1
            }
        }
        print("agent-message-fuzz: \(count) inputs, no crash")
    }
}
#endif
