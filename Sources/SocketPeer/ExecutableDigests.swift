import Foundation
import SecureCrypto
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The SHA-256 of connected programs' executables, bounded so that no user can make the daemon spend its time
/// hashing: one hash per file version (device, inode, size and times) is remembered; an executable larger than
/// ``sizeLimit`` is never read; and each user may have at most ``budget`` bytes hashed per ``budgetPeriod``.
/// A program not hashed for either reason is served as unregistered (by its file version), and the daemon logs why.
///
/// The limits come from `LA_DIGEST_SIZE_LIMIT` and `LA_DIGEST_BUDGET` (bytes) where set.
package final class ExecutableDigests: Sendable {
    /// The daemon's.
    package static let shared: ExecutableDigests = {
        let environment = ProcessInfo.processInfo.environment
        return ExecutableDigests(
            sizeLimit: environment["LA_DIGEST_SIZE_LIMIT"].flatMap { Int64($0) } ?? 512 << 20,
            budget: environment["LA_DIGEST_BUDGET"].flatMap { Int64($0) } ?? 2 << 30)
    }()

    /// What hashing an executable gave.
    package enum Outcome: Sendable, Equatable {
        /// Its SHA-256.
        case digest(Data)
        /// It was not read, and why (over the size limit, or over its user's budget).
        case notHashed(String)
        /// It could not be read.
        case unreadable
    }

    /// The largest executable hashed, in bytes.
    package let sizeLimit: Int64
    /// How many bytes one user's programs may have hashed within ``budgetPeriod``.
    package let budget: Int64
    /// The period the budget counts over.
    package let budgetPeriod: Duration = .seconds(60)

    private let digests = Mutex<[PeerProcess.FileIdentity: Data]>([:])
    /// Each user's hashing: when and how many bytes, within the last ``budgetPeriod``.
    private let spent = Mutex<[UInt32: [(at: ContinuousClock.Instant, bytes: Int64)]]>([:])

    package init(sizeLimit: Int64, budget: Int64) {
        self.sizeLimit = sizeLimit
        self.budget = budget
    }

    /// The digest of file version `file` if known.
    package func known(_ file: PeerProcess.FileIdentity) -> Data? {
        digests.withLock { $0[file] }
    }

    /// The digest of `file`, read through the descriptor `open` returns (closed here) and charged to user `uid`,
    /// unless known already.
    package func digest(of file: PeerProcess.FileIdentity, uid: UInt32, open: () -> Int32) -> Outcome {
        if let known = known(file) { return .digest(known) }
        guard file.size <= sizeLimit else {
            return .notHashed("the executable has \(file.size) bytes, over the limit of \(sizeLimit)")
        }
        // Each hash costs at least a mebibyte of the budget: many tiny executables cannot flush the remembered digests.
        guard charge(max(file.size, 1 << 20), to: uid) else {
            return .notHashed("uid \(uid) had \(budget) bytes of executables hashed within \(budgetPeriod)")
        }
        let descriptor = open()
        guard descriptor >= 0 else { return .unreadable }
        defer { close(descriptor) }
        var hash = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var total: Int64 = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return .unreadable }
            if count == 0 { break }
            total += Int64(count)
            // The file grew since its size was read: it is another version, and no longer the one charged.
            guard total <= file.size else { return .unreadable }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        let digest = hash.finalize()
        digests.withLock { digests in
            if digests.count >= 4_096 { digests.removeAll() }
            digests[file] = digest
        }
        return .digest(digest)
    }

    /// Charges `bytes` to `uid`'s budget; false (nothing charged) when that would exceed it.
    private func charge(_ bytes: Int64, to uid: UInt32) -> Bool {
        let now = ContinuousClock.now
        return spent.withLock { spent in
            var recent = (spent[uid] ?? []).filter { now - $0.at < budgetPeriod }
            let used = recent.reduce(0) { $0 + $1.bytes }
            guard used + bytes <= budget else {
                spent[uid] = recent
                return false
            }
            recent.append((now, bytes))
            spent[uid] = recent
            return true
        }
    }
}
