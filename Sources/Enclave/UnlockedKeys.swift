import CKeyutils
import Foundation
import SecureCrypto
import Synchronization

/// Where a passcode-protected store's class keys are while its classes are available: nowhere on disk. The
/// daemon keeps them in its own memory; embedded clients, which are many processes of one user sharing a store,
/// in the kernel's keyring of that user (`keyutils`), which every process of the user can read and which is gone
/// at reboot. "Locked" is their absence.
package enum UnlockedKeyHolding: Sendable, Equatable {
    /// The kernel's user keyring (`@u`): embedded mode.
    case kernelKeyring
    /// This process's memory: localauthd.
    case processMemory
}

/// The two sets of unlocked keys: `ak`/`aku`/`akpu` while unlocked, `ck`/`cku` from the first unlock to reboot.
enum UnlockedSlot: String, CaseIterable {
    case unlocked
    case afterFirstUnlock = "first-unlock"
}

/// A place for a store's unlocked keys, named by the store's identity (its keybag's random ID and the directory's
/// device and inode, so a copy of the directory is another store).
protocol UnlockedKeyStore: Sendable {
    func read(_ slot: UnlockedSlot) -> SecureBytes?
    func store(_ keys: SecureBytes, in slot: UnlockedSlot) throws
    func remove(_ slot: UnlockedSlot)
}

/// Keys in this process (localauthd: one process owns each user's store).
final class ProcessMemoryKeys: UnlockedKeyStore {
    private let slots = Mutex<[UnlockedSlot: SecureBytes]>([:])

    func read(_ slot: UnlockedSlot) -> SecureBytes? { slots.withLock { $0[slot] } }
    func store(_ keys: SecureBytes, in slot: UnlockedSlot) throws { slots.withLock { $0[slot] = keys } }
    func remove(_ slot: UnlockedSlot) { slots.withLock { $0[slot] = nil } }
}

/// Keys in the kernel's user keyring: one `user` key per slot, described `la-keybag:<store>:<slot>`, readable and
/// removable by every process of the user (possessor and user: all permissions; nobody else: none).
final class KernelKeyringKeys: UnlockedKeyStore {
    private let store: String

    init(storeIdentity: String) {
        store = storeIdentity
    }

    private func description(_ slot: UnlockedSlot) -> String { "la-keybag:\(store):\(slot.rawValue)" }

    private func serial(_ slot: UnlockedSlot) -> key_serial_t? {
        let found = keyctl_search(KEY_SPEC_USER_KEYRING, "user", description(slot), 0)
        return found > 0 ? key_serial_t(found) : nil
    }

    func read(_ slot: UnlockedSlot) -> SecureBytes? {
        guard let serial = serial(slot) else { return nil }
        var buffer: UnsafeMutableRawPointer?
        let count = keyctl_read_alloc(serial, &buffer)
        guard count > 0, let buffer else { return nil }
        defer {
            secureZero(UnsafeMutableRawBufferPointer(start: buffer, count: Int(count)))
            free(buffer)
        }
        return SecureBytes(UnsafeRawBufferPointer(start: buffer, count: Int(count)))
    }

    func store(_ keys: SecureBytes, in slot: UnlockedSlot) throws {
        let serial = keys.withUnsafeBytes {
            add_key("user", description(slot), $0.baseAddress, $0.count, KEY_SPEC_USER_KEYRING)
        }
        guard serial > 0 else {
            throw EnclaveError(.io, "the kernel keyring does not take the unlocked keys (errno \(errno))")
        }
        // KEY_POS_ALL | KEY_USR_ALL: the user's other processes (embedded clients of the same store) use them too.
        _ = keyctl_setperm(serial, 0x3F3F_0000)
    }

    func remove(_ slot: UnlockedSlot) {
        while let serial = serial(slot) {
            guard keyctl_invalidate(serial) == 0 else { return }
        }
    }
}
