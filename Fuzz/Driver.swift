import Foundation

// The fuzz targets (`make fuzz`), one executable: `FUZZ_TARGET=agent` (the SSH agent's message parser),
// `FUZZ_TARGET=protocol` (localauthd's frames and messages), `FUZZ_TARGET=lane` (the lane's frame reader on a
// socket), `FUZZ_TARGET=registry` (the app registry's files), `FUZZ_TARGET=cbor` (CTAP's CBOR decoder),
// `FUZZ_TARGET=ctaphid` (the CTAPHID assembler) or `FUZZ_TARGET=u2f` (U2F's command APDUs) picks the one libFuzzer
// drives.

/// The targets by name, with their seed corpus directories.
let fuzzTargets: [(name: String, corpus: String, run: @Sendable ([UInt8]) -> Void)] = [
    ("agent", "AgentMessage/Corpus", agentMessageFuzz),
    ("protocol", "ProtocolFrame/Corpus", protocolFrameFuzz),
    ("lane", "ProtocolFrame/Corpus", laneFrameFuzz),
    ("registry", "AppRegistration/Corpus", appRegistrationFuzz),
    ("cbor", "FIDO/CBORCorpus", cborFuzz),
    ("ctaphid", "FIDO/CTAPHIDCorpus", ctaphidFuzz),
    ("u2f", "FIDO/U2FCorpus", u2fFuzz),
]

#if FUZZING
    let selected: @Sendable ([UInt8]) -> Void = {
        let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? "agent"
        guard let target = fuzzTargets.first(where: { $0.name == name }) else {
            fatalError("unknown FUZZ_TARGET \(name)")
        }
        return target.run
    }()

    /// libFuzzer's entry: one input to the target FUZZ_TARGET names.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
        selected(start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
        return 0
    }

    // SwiftPM links an executable's entry point as `<target>_main`; under libFuzzer that entry hands over to its driver.
    @_silgen_name("LLVMFuzzerRunDriver")
    private func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @_cdecl("message_fuzz_main")
    func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments) { fuzzOneInput($0, $1) }
    }
#else
    /// Without libFuzzer: runs every target over its seed corpus, so the seeds stay a regression test.
    @main
    struct CorpusRunner {
        static func main() throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
            for target in fuzzTargets {
                let directory = root + "/" + target.corpus
                let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
                for file in files {
                    target.run(Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file))))
                }
                print("message-fuzz \(target.name): \(files.count) inputs, no crash")
            }
        }
    }
#endif
