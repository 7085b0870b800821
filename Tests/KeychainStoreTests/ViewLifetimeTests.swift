import Foundation
import Testing

/// The views the hot path hands out, a message frame's bytes (`MessageReader`) and a row's columns where SQLite holds
/// them (`DirectRow`), are `RawSpan`s bound to what they view: code that keeps one past the closure it was handed to
/// does not compile. Each case compiles two snippets against the modules just built, with the package's own
/// settings: one that uses a view inside the closure (which must compile, or the check proves nothing) and one that
/// keeps it (which the compiler must refuse, for that reason).
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

    /// `swiftc` as SwiftPM ran it for this package's modules: their interfaces from the build directory beside the
    /// test bundle, the C modules' maps, and the package's name (which `package` declarations are visible under).
    /// Lifetime checks run on SIL, so a snippet is compiled to SIL, not only type-checked.
    private final class Compiler {
        let arguments: [String]
        /// Where the snippets and the C modules compiled for them go (the modules once for both snippets).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("views-\(UUID().uuidString)")

        init() throws {
            let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let buildDirectory = try Self.buildDirectory()
            var maps = [packageRoot.appendingPathComponent("Sources/COpenSSL/module.modulemap").path]
            let built = try FileManager.default.contentsOfDirectory(atPath: buildDirectory.path)
            maps += built.filter { $0.hasSuffix(".build") }.map {
                buildDirectory.appendingPathComponent($0).appendingPathComponent("module.modulemap").path
            }.filter { FileManager.default.fileExists(atPath: $0) }
            // GRDB's SQLite module is a system library target of a dependency: its map stays in the checkout.
            let checkouts = buildDirectory.deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("checkouts")
            for candidate in [
                checkouts.appendingPathComponent("GRDB.swift/Sources/GRDBSQLite/module.modulemap"),
                buildDirectory.deletingLastPathComponent().appendingPathComponent(
                    "checkouts/GRDB.swift/Sources/GRDBSQLite/module.modulemap"),
            ] where FileManager.default.fileExists(atPath: candidate.path) {
                maps.append(candidate.path)
                break
            }
            arguments =
                [
                    "swiftc", "-emit-sil", "-o", "/dev/null", "-I",
                    buildDirectory.appendingPathComponent("Modules").path,
                    "-package-name", Self.packageName(of: packageRoot), "-module-cache-path",
                    directory.appendingPathComponent("cache").path,
                ] + maps.flatMap { ["-Xcc", "-fmodule-map-file=\($0)"] }
        }

        /// The directory the test bundle was built in (where `Modules/` holds every module's interface).
        private static func buildDirectory() throws -> URL {
            var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            for _ in 0..<4 {
                if FileManager.default.fileExists(
                    atPath: directory.appendingPathComponent("Modules/KeychainStore.swiftmodule").path)
                {
                    return directory
                }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile)
        }

        /// The name SwiftPM gives a root package: its directory's, lowercased, with anything but letters, digits and
        /// underscores made underscores.
        private static func packageName(of root: URL) -> String {
            String(
                root.lastPathComponent.lowercased().map {
                    $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") ? $0 : "_"
                })
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        func compile(_ source: String) throws -> (status: Int32, output: String) {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("snippet-\(UUID().uuidString).swift")
            try source.write(to: file, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = arguments + [file.path]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }
    }
}
