import Foundation
import SecureCrypto
import StoreFiles
import Synchronization
import TrustedPlatform

/// The state file (`keybag.state`): the lock state and the persisted flags, re-read when another process changed it.
extension Enclave {
    func updateState(_ change: (inout PersistedState) -> Void) throws {
        try changingState { change(&$0.persisted) }
    }

    /// Runs `change` under the enclave's file lock on the state as the files hold it now, then writes the state
    /// file and re-reads it (other processes see the change by the state file's new stamp).
    func changingState(_ change: (inout State) throws -> Void) throws {
        let lock = try Self.files { try FileLock(path: directory.appendingPathComponent("enclave.lock").path) }
        defer { lock.unlock() }
        try state.withLock { state in
            state.stamp = nil
            try refresh(&state)
            try change(&state)
            try Self.writeFileAtomically(JSONEncoder().encode(state.persisted), to: statePath)
            state.stamp = nil
            try refresh(&state)
        }
    }

    /// Re-reads the state file when it changed (and then the keybag, when another process rewrote it), and brings the
    /// set of class keys in memory in line with it. A protected store keeps only `dk`/`dku` here; its passcode classes
    /// are read from where unlocked keys are kept, on each use, so a lock by another process counts at once.
    ///
    /// The state file read last is held open, so the check on each use is one `fstat` of it, with no path to walk:
    /// it is the file under the name as long as it is still linked with the stamp it had (a rewrite renames a new
    /// file over it, which unlinks it; a deletion unlinks it; a write into it changes its size or times). Only when
    /// that fails is the name looked up again.
    func refresh(_ state: inout State) throws {
        if let file = state.stateFile, let known = state.stamp, file.linkedStamp == known { return }
        let file = OpenFile(statePath)
        state.stateFile = file
        let stamp = file?.linkedStamp
        if stamp == state.stamp && stamp != nil { return }
        // A state file that vanished or does not decode means locked (keeping what else it said).
        if stamp != nil, let data = try? Self.readFile(statePath),
            let persisted = try? JSONDecoder().decode(PersistedState.self, from: data)
        {
            state.persisted = persisted
        } else {
            state.persisted.locked = true
        }
        state.stamp = stamp
        // Another process may have changed the keybag (it rewrites the keybag, then the state file): protected it
        // (from then on the root-only copies are gone), re-sealed it under a new passcode, or destroyed `akpu`.
        let keybagStamp = Self.stamp(of: keybagPath)
        if keybagStamp != state.keybagStamp {
            let entries = try Self.decodeKeybag(try Self.readFile(keybagPath)).1
            if let protection = try PasscodeProtection(entries: entries) {
                state.protection = protection
                for protectionClass in PasscodeProtection.classes { state.wrappedClassKeys[protectionClass] = nil }
            } else if state.protection == nil {
                for protectionClass in PasscodeProtection.classes {
                    // A class key made afresh (akpu destroyed) replaces the one in memory.
                    if state.wrappedClassKeys[protectionClass] != entries[protectionClass.rawValue] {
                        state.classKeys[protectionClass] = nil
                    }
                    state.wrappedClassKeys[protectionClass] = entries[protectionClass.rawValue]
                }
            }
            state.keybagStamp = keybagStamp
        }
        let afterFirstUnlock = !state.persisted.locked || state.persisted.unlockBootID == bootID
        var wanted: Set<ProtectionClass> = []
        for protectionClass in ProtectionClass.allCases {
            let available: Bool
            switch protectionClass.availability {
            case .always: available = true
            case .afterFirstUnlock: available = afterFirstUnlock && state.protection == nil
            case .unlocked: available = !state.persisted.locked && state.protection == nil
            }
            if available && (protectionClass != .whenPasscodeSetThisDeviceOnly || state.persisted.passcodeSet) {
                wanted.insert(protectionClass)
            }
        }
        for protectionClass in state.classKeys.keys where !wanted.contains(protectionClass) {
            state.classKeys[protectionClass] = nil
        }
        let missing = wanted.filter { state.classKeys[$0] == nil }
        if missing.isEmpty { return }
        let rootKey = try rootKeys.load()
        for protectionClass in missing {
            guard let wrapped = state.wrappedClassKeys[protectionClass] else {
                throw EnclaveError(.corrupt, "the keybag does not hold every key")
            }
            state.classKeys[protectionClass] = try Self.unwrap(
                wrapped, name: protectionClass.rawValue, rootKey: rootKey)
        }
    }
}
