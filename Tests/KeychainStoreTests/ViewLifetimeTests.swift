import Foundation
import TestSupport
import Testing

/// The views the hot path hands out, a message frame's bytes (`MessageReader`) and a row's columns where SQLite holds
/// them (`DirectRow`), are `RawSpan`s bound to what they view: code that keeps one past the closure it was handed to
/// does not compile. Each case compiles two snippets against the modules just built, with the compiler and settings
/// the build used: one that uses a view inside the closure (which must compile, or the check proves nothing) and one
/// that keeps it (which the compiler must refuse, for that reason).
@Suite("Views of frames and rows cannot outlive them")
struct ViewLifetimeTests {
    @Test func aFramesBytesCannotBeKeptPastTheReader() throws {
        try expectRefused(
            using: """
                import SecurityProtocol
                func count(_ frame: UnsafeRawBufferPointer) throws -> Int {
                    try MessageReader.read(frame) { reader in try reader.bytes().byteCount }
                }
                """,
            keeping: """
                import SecurityProtocol
                func keep(_ frame: UnsafeRawBufferPointer) throws -> Int {
                    var kept: RawSpan? = nil
                    try MessageReader.read(frame) { reader in kept = try reader.bytes() }
                    return kept!.byteCount
                }
                """)
    }

    @Test func aRowsColumnsCannotBeKeptPastTheLookup() throws {
        try expectRefused(
            using: """
                import KeychainStore
                func count(_ database: KeychainDatabase, _ index: RawSpan) throws -> Int {
                    var count = 0
                    _ = try database.withItem(blindIndex: index, includingValue: true) { row in
                        count = row.wrappedKey.byteCount + (row.value?.byteCount ?? 0)
                    }
                    return count
                }
                """,
            keeping: """
                import KeychainStore
                func keep(_ database: KeychainDatabase, _ index: RawSpan) throws -> Int {
                    var kept: RawSpan? = nil
                    _ = try database.withItem(blindIndex: index, includingValue: true) { row in
                        kept = row.wrappedKey
                    }
                    return kept!.byteCount
                }
                """)
    }

    /// Compiles `using` (which must succeed) and `keeping` (which must fail on a lifetime-dependent value escaping).
    private func expectRefused(using: String, keeping: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let compiler = try Compiler()
        let used = try compiler.compile(using)
        #expect(
            used.status == 0, "the snippet that uses a view in place must compile:\n\(used.output)",
            sourceLocation: sourceLocation)
        let kept = try compiler.compile(keeping)
        #expect(kept.status != 0, "the snippet that keeps a view must not compile", sourceLocation: sourceLocation)
        #expect(
            kept.output.contains("escapes its scope"), "refused for another reason:\n\(kept.output)",
            sourceLocation: sourceLocation)
    }

    /// `swiftc` as SwiftPM ran it for KeychainStore in this build: the same compiler, target, language mode, package
    /// name (which `package` declarations are visible under), module search path and C modules' maps, read from the
    /// build's own manifest (`<scratch>/<configuration>.yaml`). Lifetime checks run on SIL, so a snippet is compiled
    /// to SIL, not only type-checked.
    private final class Compiler {
        let arguments: [String]
        /// Where the snippets and the C modules compiled for them go (the modules once for both snippets).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("views-\(UUID().uuidString)")

        init() throws {
            let command = try Self.keychainStoreCommand()
            var arguments = [command[0], "-emit-sil", "-o", "/dev/null"]
            var index = 1
            while index + 1 < command.count {
                if ["-I", "-target", "-swift-version", "-package-name", "-Xcc"].contains(command[index]) {
                    arguments += [command[index], command[index + 1]]
                    index += 2
                } else {
                    index += 1
                }
            }
            self.arguments = arguments + ["-module-cache-path", directory.appendingPathComponent("cache").path]
        }

        /// The arguments SwiftPM compiled the KeychainStore module with, from the manifest beside the build
        /// directory the test bundle runs from.
        private static func keychainStoreCommand() throws -> [String] {
            var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            for _ in 0..<4 {
                if FileManager.default.fileExists(
                    atPath: directory.appendingPathComponent("Modules/KeychainStore.swiftmodule").path)
                {
                    break
                }
                directory = directory.deletingLastPathComponent()
            }
            // <scratch>/<triple>/<configuration> → <scratch>/<configuration>.yaml
            let configuration = directory.lastPathComponent
            let manifest = directory.deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("\(configuration).yaml")
            let lines = try String(contentsOf: manifest, encoding: .utf8).split(separator: "\n")
            guard
                let command = lines.firstIndex(where: {
                    $0.hasPrefix("  \"C.KeychainStore-") && $0.hasSuffix("-\(configuration).module\":")
                }),
                let argumentsLine = lines[command...].first(where: { $0.hasPrefix("    args: ") }),
                let arguments = try JSONSerialization.jsonObject(
                    with: Data(argumentsLine.dropFirst("    args: ".count).utf8)) as? [String],
                !arguments.isEmpty
            else { throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: manifest.path]) }
            return arguments
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        func compile(_ source: String) throws -> (status: Int32, output: String) {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("snippet-\(UUID().uuidString).swift")
            try source.write(to: file, atomically: true, encoding: .utf8)
            return try runCapturingOutput(
                URL(fileURLWithPath: arguments[0]), Array(arguments.dropFirst()) + [file.path])
        }
    }
}
