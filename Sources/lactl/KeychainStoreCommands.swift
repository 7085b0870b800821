import ArgumentParser
import EmbeddedEngine
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SwiftKeychain
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

// MARK: Lock, backup and check

struct LockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the keychain: items readable only when unlocked stay unreadable until it is unlocked.")

    @OptionGroup var options: KeychainOptions

    func run() throws {
        try reporting {
            let client = try options.client()
            try KeychainClientSelection.$current.withValue(client) {
                do {
                    try Keychain.default.lock()
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(status: error.status, operation: "lock the keychain")
                }
            }
            // Locked, but until a passcode unlock seals the class keys under the passcode, "locked" is a flag in the
            // store's state file: say so, as `lactl status` does.
            if case .sealedUnderPasscode(false) = try? client.sendBlocking(.sealingState) {
                let note =
                    "lactl: the keychain is locked, but not yet sealed under the passcode: the lock is a flag in the "
                    + "store's state file and protects nothing against whoever can write it. 'lactl keychain unlock' "
                    + "seals it.\n"
                FileHandle.standardError.write(Data(note.utf8))
            }
        }
    }
}

struct UnlockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the keychain with an enrolled finger when localauthd allows it, else with the passcode.",
        discussion: """
            Through localauthd, within 48 hours of an unlock by passcode since the daemon started and before 5 \
            failed scans, a finger unlocks (Enter: use the passcode instead). Otherwise the passcode is asked on the \
            terminal and checked through PAM: the service is $LA_PAM_SERVICE (default 'local-authentication'; \
            install Resources/pam.d/local-authentication as /etc/pam.d/local-authentication), its directory \
            $LA_PAM_CONFDIR. Failed attempts count toward the passcode waits; a success also lifts a fingerprint \
            lockout.
            """)

    @OptionGroup var options: KeychainOptions

    func run() throws {
        try reporting {
            let client = try options.client()
            guard try !unlockWithFinger(client) else { return }
            try unlockWithPasscode(client, reason: "Unlock the keychain", operation: "unlock the keychain")
        }
    }

    /// Offers the finger when the daemon keeps the keychain's keys for it; true when it unlocked. A cancel ends
    /// the command; any other failure (no fingerprint unlock possible now, the fallback, a finger not recognised)
    /// goes on to the passcode.
    private func unlockWithFinger(_ client: any SecurityClient) throws -> Bool {
        guard let presenter = client.defaultPresenter else { return false }
        let prompt = EvaluationPrompt(reason: "Unlock the keychain", fallbackTitle: "Use Passcode")
        do {
            _ = try BlockingBridge.wait {
                try await client.send(.unlockWithBiometry(EvaluationOptions(prompt: prompt)), presenter: presenter)
            }
            return true
        } catch let error as AuthenticationError
            where [.userCancel, .systemCancel, .appCancel].contains(error.code)
        {
            printError(error)
            throw KeychainCommandFailure(
                status: KeychainStatus.Code(authenticationCode: error.code).rawValue, operation: "unlock the keychain")
        } catch {
            return false
        }
    }
}

/// Unlocks the keychain after asking for the passcode on the client's terminal (PAM checks it; a changed passcode
/// re-seals, asking once for the previous one).
///
/// - Throws: `KeychainCommandFailure` for `operation` when there is no terminal or the keychain does not open.
func unlockWithPasscode(_ client: any SecurityClient, reason: String, operation: String) throws {
    guard let presenter = client.defaultPresenter else {
        throw KeychainCommandFailure(
            status: errSecInteractionNotAllowed, operation: "\(operation) (no terminal to ask on)")
    }
    let options = EvaluationOptions(prompt: EvaluationPrompt(reason: reason))
    do {
        _ = try BlockingBridge.wait { try await client.send(.unlockWithPasscode(options), presenter: presenter) }
    } catch let error as AuthenticationError {
        printError(error)
        throw KeychainCommandFailure(
            status: KeychainStatus.Code(authenticationCode: error.code).rawValue, operation: operation)
    }
}

struct ExportKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export the keychain's items to a file encrypted under a backup password.",
        discussion: """
            ThisDeviceOnly items, enclave keys and items under an access-control list (rights, SSH agent keys, \
            items that ask for a finger or the passcode) never leave this machine: they stay behind, and the \
            command says how many. No restore of the file brings them back.
            """)

    @OptionGroup var options: KeychainOptions
    @Argument(help: "The backup file to write.") var file: String

    func run() throws {
        let password = try readSecret(prompt: "backup password: ")
        guard !password.isEmpty else { throw ValidationError("the backup password is empty") }
        try reporting {
            let (exported, leftBehind) = try options.run(reaching: .everyGroup) {
                do {
                    return try Keychain.default.exportBackup(to: URL(fileURLWithPath: file), secret: password)
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(error, operation: "export the keychain")
                }
            }
            print("exported \(items(exported)) to \(file)")
            if leftBehind > 0 {
                print(
                    "\(items(leftBehind)) stayed behind: ThisDeviceOnly items, enclave keys and items under an "
                        + "access-control list never leave this machine, and no restore of this file brings them back")
            }
        }
    }
}

struct ImportKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Add the items of a backup file; existing items stay as they are.",
        discussion: """
            With --replace-damaged, when `lactl keychain check` finds the keychain database damaged, the damaged \
            file is moved aside (keychain.db.damaged-<time>, kept) and the backup's items fill a new database. \
            Nothing moves when the backup does not open or the database is not damaged.
            """)

    @OptionGroup var options: KeychainOptions
    @Flag(help: "Set a damaged keychain database aside and restore from the backup into a new one.")
    var replaceDamaged = false
    @Argument(help: "The backup file to read.") var file: String

    func run() throws {
        let password = try readSecret(prompt: "backup password: ")
        try reporting {
            if replaceDamaged {
                let (count, notRestored, aside) = try options.run(reaching: .everyGroup) {
                    do {
                        return try Keychain.default.restoreBackup(from: URL(fileURLWithPath: file), secret: password)
                    } catch let error as KeychainError {
                        throw KeychainCommandFailure(error, operation: "restore from the backup")
                    }
                }
                print("the damaged database was moved to \(aside)")
                print("restored \(items(count)) from \(file)")
                Self.reportNotAdded(notRestored)
                return
            }
            let (added, notAdded) = try options.run(reaching: .everyGroup) {
                do {
                    return try Keychain.default.importBackup(from: URL(fileURLWithPath: file), secret: password)
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(error, operation: "import the backup")
                }
            }
            print("imported \(items(added)) from \(file)")
            Self.reportNotAdded(notAdded)
        }
    }

    private static func reportNotAdded(_ count: Int) {
        if count > 0 {
            print(
                "not added: \(items(count)) of the backup, already in the keychain (kept as they are), "
                    + "ThisDeviceOnly items or identities, or in an access group this program may not use")
        }
    }
}

/// `lactl keychain check`: whether the keychain database is sound, as `sqlite3`'s integrity check and the engine's
/// opening of every unlocked row see it. Exits 1 when it finds damage.
struct CheckKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Check the keychain database for damage (exit status 1 when damaged).")

    @OptionGroup var options: KeychainOptions

    func run() throws {
        let report = try reporting {
            try options.run(reaching: .everyGroup) {
                do {
                    return try Keychain.default.checkStore()
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(error, operation: "check the keychain")
                }
            }
        }
        print("file: \(report.file)")
        print("items: \(report.rowCount.map(String.init) ?? "unknown")")
        if report.lockedRows > 0 { print("not checked (their class is locked): \(report.lockedRows)") }
        if report.isDamaged {
            print("damaged:")
            for problem in report.problems { print("  \(problem)") }
            print("To recover: lactl keychain import --replace-damaged BACKUP")
            throw ExitCode(1)
        }
        if report.unreadableRows > 0 {
            print("items that do not open: \(report.unreadableRows) (their data or attributes are damaged)")
            throw ExitCode(1)
        }
        print("ok")
    }
}

/// "1 item", "2 items".
private func items(_ count: Int) -> String {
    count == 1 ? "1 item" : "\(count) items"
}
