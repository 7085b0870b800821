import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// libfprint takes its virtual reader from process-wide variables. A world made by a test that does not hold the
/// reader lock pointed them at its own reader while a test that holds it was running: that test's engine, or a
/// child inheriting them, then opened the other world's reader, whose listener took the place of the one its
/// scans were meant for ("no operation read it", issue 54).
@Suite(.libfprintOnly("fprintd worlds give their reader to fprintd, never to this process"))
struct WorldReaderTests {
    static func scratch() throws -> String {
        var template = Array("/tmp/la-world-reader-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        return String(cString: made)
    }

    static var processReader: String? { getenv("FP_VIRTUAL_DEVICE").map { String(cString: $0) } }

    /// Outside the lock, the world's reader is only for the children it is given to.
    @Test func aWorldOutsideTheReaderLockLeavesTheProcessReaderAlone() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try WorldReader(directory: directory)
        #expect(Self.processReader != reader.socket.path)
        #expect(reader.environment["FP_VIRTUAL_DEVICE"] == reader.socket.path)
    }

    /// A test that holds the lock drives its world's reader in this process.
    @Test(.virtualReaderLock) func aWorldInsideTheReaderLockIsThisProcesssReader() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try WorldReader(directory: directory)
        #expect(Self.processReader == reader.socket.path)
    }
}
