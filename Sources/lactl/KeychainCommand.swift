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

/// `lactl keychain …`: the keychain for people, with the subcommand names of macOS `security`.
struct KeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychain",
        abstract: "Add, find, delete, dump, lock, export, import and check keychain items.",
        subcommands: [
            AddGenericPassword.self, FindGenericPassword.self, DeleteGenericPassword.self,
            AddInternetPassword.self, FindInternetPassword.self, DeleteInternetPassword.self,
            DumpKeychain.self, LockKeychain.self, UnlockKeychain.self, LockOnScreenLock.self, ExportKeychain.self,
            ImportKeychain.self, CheckKeychain.self,
            TrustApplications.self, UntrustApplications.self,
        ])
}

/// Options every keychain subcommand takes.
struct KeychainOptions: ParsableArguments {
    @Option(help: "The store directory (default: $LA_DATA_DIR, else $XDG_DATA_HOME/local-authentication).")
    var dataDir: String?

    /// Runs `body` with the SecItem functions bound to this store, reaching the groups `reach` names.
    ///
    /// Embedded, `lactl` acts for the user who owns the files, so it sees every access group; new items go to the
    /// first of `$LA_ACCESS_GROUPS` (default `local.lactl`). Through localauthd it holds its own groups (its
    /// registration's), and the user is asked for a finger or the passcode first when `reach` or
    /// `$LA_ACCESS_GROUPS` goes beyond them (``OtherApplicationsAccess``).
    func run<T>(reaching reach: KeychainReach = .claimed, _ body: () throws -> T) throws -> T {
        let client = try client(reaching: reach)
        return try KeychainClientSelection.$current.withValue(client) { try body() }
    }

    /// The daemon's client when one is configured (`LA_DAEMON_SOCKET`, `client.conf`; `--data-dir` does not apply
    /// then: the daemon owns the store), its connection widened to `reach` after asking the user when that goes
    /// beyond lactl's own groups; else an embedded client on this store whose authenticators (PAM, fingerprint
    /// reader) come from the environment, which sees every group. Either prompts on the terminal, so protected
    /// items can be read after authenticating.
    ///
    /// - Throws: `KeychainCommandFailure` when the keychain cannot be opened or the user did not allow `reach`.
    func client(reaching reach: KeychainReach = .claimed) throws -> any SecurityClient {
        do {
            if case .daemon(let socket) = ClientSelection.mode() {
                guard dataDir == nil else {
                    throw KeychainCommandFailure(
                        status: errSecParam, operation: "use --data-dir (the daemon configured owns the store)")
                }
                return try daemonClient(socket: socket, reaching: reach)
            }
            var configuration = EmbeddedConfiguration.fromEnvironment()
            if let dataDir { configuration.dataDirectory = URL(fileURLWithPath: dataDir, isDirectory: true) }
            configuration.mayAccessAllGroups = true
            return try EmbeddedClient(
                configuration: configuration,
                authentication: .fromEnvironment(dataDirectory: configuration.dataDirectory),
                defaultPresenter: TerminalPresenter.environmentDefault())
        } catch let failure as KeychainCommandFailure {
            throw failure
        } catch let status as KeychainStatus {
            throw KeychainCommandFailure(
                status: status.code.rawValue, operation: "open the keychain: \(status.message)")
        } catch {
            throw KeychainCommandFailure(status: errSecNotAvailable, operation: "open the keychain")
        }
    }
}

extension KeychainOptions {
    /// localauthd's client, claiming the groups `$LA_ACCESS_GROUPS` names (when set) and the one `reach` names,
    /// or every group; what goes beyond lactl's own groups is asked of the user before the client is returned.
    private func daemonClient(socket: String, reaching reach: KeychainReach) throws -> SocketClient {
        let environment = ProcessInfo.processInfo.environment
        // Only what the environment names: lactl's default group (`local.lactl`) is not its own here.
        var claimed: [String] = []
        if environment["LA_ACCESS_GROUPS"] != nil {
            claimed = EmbeddedConfiguration.fromEnvironment(environment).accessGroups
        }
        var everyGroup = false
        switch reach {
        case .claimed, .group(nil): break
        case .group(let group?): if !claimed.contains(group) { claimed.append(group) }
        case .everyGroup: everyGroup = true
        }
        let client = try SocketClient(
            path: socket, accessGroups: claimed, allGroups: everyGroup,
            defaultPresenter: TerminalPresenter.environmentDefault())
        try OtherApplicationsAccess.request(client, claimed: claimed, everyGroup: everyGroup)
        return client
    }
}

/// A failed operation, reported as `security` does (its message on stderr) with its exit status: 44 for an item
/// that is not found, as macOS `security`, 1 otherwise.
struct KeychainCommandFailure: Error, CustomStringConvertible {
    var status: OSStatus
    var operation: String
    /// What the engine said beyond the status (which file is damaged, say).
    var detail: String?

    init(status: OSStatus, operation: String, detail: String? = nil) {
        self.status = status
        self.operation = operation
        self.detail = detail
    }

    /// `error`'s status and the engine's words.
    init(_ error: KeychainError, operation: String) {
        self.init(status: error.status, operation: operation, detail: error.detail)
    }

    var description: String {
        let text = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
        let message = "lactl: \(operation): \(text)"
        return detail.map { message + " (\($0))" } ?? message
    }
}

private func check(_ status: OSStatus, _ operation: String) throws {
    guard status == errSecSuccess else {
        // Only the failures people act on carry the engine's words: a damaged, read-only or failing store.
        let detail =
            [errSecNotAvailable, errSecReadOnly, errSecIO, errSecDiskFull].contains(status)
            ? SecItemFailureDetail.current : nil
        throw KeychainCommandFailure(status: status, operation: operation, detail: detail)
    }
}

/// Runs a keychain subcommand body, turning failures into the message and exit status.
func reporting<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let failure as KeychainCommandFailure {
        FileHandle.standardError.write(Data("\(failure)\n".utf8))
        throw ExitCode(failure.status == errSecItemNotFound ? 44 : 1)
    }
}

/// Reads a secret from the terminal with echo off, or from standard input when it is not a terminal (one line).
func readSecret(prompt: String) throws -> SecureBytes {
    let maximum = 64 * 1024
    var buffer = SecureBytes(zeros: maximum)
    let interactive = isatty(STDIN_FILENO) == 1
    let fd = interactive ? open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC) : STDIN_FILENO
    guard fd >= 0 else { throw ValidationError("no terminal to read the secret from") }
    defer { if interactive { close(fd) } }
    var saved = termios()
    if interactive {
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        tcgetattr(fd, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(fd, TCSAFLUSH, &quiet)
    }
    defer {
        if interactive {
            tcsetattr(fd, TCSAFLUSH, &saved)
            _ = write(fd, "\n", 1)
        }
    }
    let length = buffer.withUnsafeMutableBytes { bytes -> Int in
        var length = 0
        while length < bytes.count {
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            bytes[length] = byte
            length += 1
        }
        return length
    }
    if length > 0, buffer.withUnsafeBytes({ $0[length - 1] }) == 0x0D { return buffer.slice(0..<length - 1) }
    return buffer.slice(0..<length)
}

/// Prints one item's attributes as `security find-…-password` does, and its data when asked.
private func printItem(_ item: [String: Any], showData: Bool) {
    print("class: \"\(item[kSecClass as String] as? String ?? "")\"")
    print("attributes:")
    for key in item.keys.sorted() where key != kSecClass as String && key != kSecValueData as String {
        print("    \"\(key)\"=\(describe(item[key]!))")
    }
    if showData, let data = item[kSecValueData as String] as? Data {
        print("data:\n\(describe(data))")
    }
}

private func describe(_ value: Any) -> String {
    switch value {
    case let string as String: return "\"\(string)\""
    case let data as Data:
        if let text = String(data: data, encoding: .utf8), !text.contains(where: { $0.isNewline || $0 == "\0" }) {
            return "\"\(text)\""
        }
        return "0x" + data.map { String(format: "%02X", $0) }.joined()
    case let date as Date: return "\"\(ISO8601DateFormatter().string(from: date))\""
    case let access as SecAccessControl:
        return "<access control \(access.protection) 0x\(String(access.flags.rawValue, radix: 16))>"
    case let access as SecAccess:
        let names = access.trustedApplications.map { "\($0.applicationIdentifier) (\($0.path))" }
        return "<trusted applications: \(names.isEmpty ? "none" : names.joined(separator: ", "))>"
    default: return "\(value)"
    }
}

/// A keychain dictionary as lactl builds it from options.
extension [String: Any] {
    /// Sets `key` to `value` when there is one.
    mutating func set(_ key: CFString, _ value: Any?) {
        if let value { self[key as String] = value }
    }
}

// MARK: Generic passwords

/// The attributes that name generic passwords, as `security` takes them: `-a` account, `-s` service, `-G` group.
struct GenericPasswordSelection: ParsableArguments {
    @Option(name: .customShort("a"), help: "Account name.") var account: String?
    @Option(name: .customShort("s"), help: "Service name.") var service: String?
    @Option(name: .customShort("G"), help: "Access group.") var accessGroup: String?

    /// A query for the generic passwords these attributes name (an attribute not given matches any value).
    var query: [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        query.set(kSecAttrAccount, account)
        query.set(kSecAttrService, service)
        query.set(kSecAttrAccessGroup, accessGroup)
        return query
    }

    /// The new item's primary key: an attribute not given is empty, as `security add-generic-password` makes it.
    var item: [String: Any] {
        var item = query
        item[kSecAttrAccount as String] = account ?? ""
        item[kSecAttrService as String] = service ?? ""
        return item
    }
}

struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add a generic password (reads it from the terminal or stdin unless -w).")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: GenericPasswordSelection
    @Option(name: .customShort("w"), help: "The password (visible to other users in the process list; prefer stdin).")
    var password: String?
    @Option(name: .customShort("l"), help: "Label.") var label: String?
    @Option(name: .customShort("j"), help: "Comment.") var comment: String?
    @Option(
        name: .customShort("T"),
        help: "A program that may use the item without being asked (repeatable; \"\" for none: every program is asked)."
    )
    var trustedApplications: [String] = []
    @Flag(name: .customShort("U"), help: "Update the item if it exists.") var update = false

    func run() throws {
        try reporting {
            let secret =
                try password.map { SecureBytes(Data($0.utf8)) } ?? readSecret(prompt: "password data for new item: ")
            var attributes: [String: Any] = [kSecValueData as String: secret.unprotectedData()]
            attributes.set(kSecAttrLabel, label)
            attributes.set(kSecAttrComment, comment)
            if !trustedApplications.isEmpty {
                attributes[kSecAttrAccess as String] = try access(
                    ItemAccess(descriptor: label ?? selection.service ?? "", applications: []),
                    trusting: trustedApplications.filter { !$0.isEmpty })
            }
            try addOrUpdate(selection.item, attributes: attributes, update: update, options: options)
        }
    }
}

struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password", abstract: "Find a generic password and print its attributes.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: GenericPasswordSelection
    @Option(name: .customShort("l"), help: "Label.") var label: String?
    @Flag(name: .customShort("g"), help: "Also print the password.") var showPassword = false
    @Flag(name: .customShort("w"), help: "Print only the password.") var passwordOnly = false

    func run() throws {
        var query = selection.query
        query.set(kSecAttrLabel, label)
        try find(query, options: options, showPassword: showPassword, passwordOnly: passwordOnly)
    }
}

struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password", abstract: "Delete the generic passwords that match.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: GenericPasswordSelection

    func run() throws {
        try delete(selection.query, options: options)
    }
}

/// The access group `query` names (`-G`), if any.
private func accessGroup(of query: [String: Any]) -> String? {
    query[kSecAttrAccessGroup as String] as? String
}

/// Deletes every item that matches `query`, as `security delete-*-password` does, and says so.
private func delete(_ query: [String: Any], options: KeychainOptions) throws {
    try reporting {
        try options.run(reaching: .group(accessGroup(of: query))) {
            try check(SecItemDelete(query as CFDictionary), "delete the item")
        }
    }
    print("password has been deleted.")
}

/// Adds the item identified by `item` with `attributes`; when it exists and `update` (`-U`) is set, updates it.
private func addOrUpdate(
    _ item: [String: Any], attributes: [String: Any], update: Bool, options: KeychainOptions
) throws {
    try options.run(reaching: .group(accessGroup(of: item))) {
        let status = SecItemAdd(item.merging(attributes) { _, new in new } as CFDictionary, nil)
        if status == errSecDuplicateItem && update {
            try check(SecItemUpdate(item as CFDictionary, attributes as CFDictionary), "update the item")
        } else {
            try check(status, "add the item")
        }
    }
}

private func find(_ query: [String: Any], options: KeychainOptions, showPassword: Bool, passwordOnly: Bool) throws {
    var query = query
    query[kSecReturnAttributes as String] = true
    if showPassword || passwordOnly { query[kSecReturnData as String] = true }
    try reporting {
        try options.run(reaching: .group(accessGroup(of: query))) {
            var result: CFTypeRef?
            try check(SecItemCopyMatching(query as CFDictionary, &result), "find the item")
            guard let item = result as? [String: Any] else { return }
            if passwordOnly {
                FileHandle.standardOutput.write((item[kSecValueData as String] as? Data ?? Data()) + Data("\n".utf8))
            } else {
                printItem(item, showData: showPassword)
            }
        }
    }
}

// MARK: Trusted applications

/// Which item `trust` and `untrust` change: a generic password by service and account, or an internet password by
/// server and account.
struct TrustedItemOptions: ParsableArguments {
    @Option(name: .customShort("s"), help: "Service name (a generic password).") var service: String?
    @Option(name: .customShort("r"), help: "Server name (an internet password).") var server: String?
    @Option(name: .customShort("a"), help: "Account name.") var account: String?
    @Option(name: .customShort("G"), help: "Access group.") var accessGroup: String?

    func validate() throws {
        guard (service == nil) != (server == nil) else { throw ValidationError("name the item with -s or -r") }
    }

    var query: [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: server == nil ? kSecClassGenericPassword : kSecClassInternetPassword
        ]
        query.set(kSecAttrService, service)
        query.set(kSecAttrServer, server)
        query.set(kSecAttrAccount, account)
        query.set(kSecAttrAccessGroup, accessGroup)
        return query
    }

    /// Replaces the item's trusted-application list with what `change` makes of it (no list: an empty one named
    /// after the item). Unless `lactl` is on the list, the keychain asks first whether it may change the item, and
    /// then for the user's finger or passcode.
    func changeList(options: KeychainOptions, _ change: (ItemAccess) throws -> ItemAccess) throws {
        try reporting {
            try options.run(reaching: .group(accessGroup)) {
                var found: CFTypeRef?
                var lookup = query
                lookup[kSecReturnAttributes as String] = true
                try check(SecItemCopyMatching(lookup as CFDictionary, &found), "find the item")
                let attributes = found as? [String: Any] ?? [:]
                let current =
                    (attributes[kSecAttrAccess as String] as? SecAccess)?.access
                    ?? ItemAccess(descriptor: service ?? server ?? "", applications: [])
                let update = [kSecAttrAccess as String: SecAccess(try change(current))]
                try check(SecItemUpdate(query as CFDictionary, update as CFDictionary), "change the item's list")
                // Read back: the keychain names each program (its registration, or unregistered.<sha256>).
                try check(SecItemCopyMatching(lookup as CFDictionary, &found), "find the item")
                let changed = ((found as? [String: Any])?[kSecAttrAccess as String] as? SecAccess)?.access ?? current
                for application in changed.applications {
                    print("trusted: \(application.applicationIdentifier) \(application.executable)")
                }
                if changed.applications.isEmpty { print("trusted: none (every program is asked)") }
            }
        }
    }
}

/// `list` with the programs at `paths` trusted (replacing their earlier versions).
private func access(_ list: ItemAccess, trusting paths: [String]) throws -> SecAccess {
    var list = list
    for path in paths {
        guard let program = TrustedApplication.reading(path) else {
            throw KeychainCommandFailure(status: errSecParam, operation: "read the program \(path)")
        }
        list = list.trusting(program)
    }
    return SecAccess(list)
}

struct TrustApplications: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Let programs use an item without being asked (its list of trusted applications, kSecAttrAccess).",
        discussion: """
            Each PROGRAM is an executable; it is trusted by the SHA-256 of its contents now, so a rebuilt or replaced \
            program is asked again ("has changed"). Unless lactl is on the item's list, the keychain asks first and \
            then wants your finger or passcode.
            """)

    @OptionGroup var options: KeychainOptions
    @OptionGroup var item: TrustedItemOptions
    @Argument(help: "The programs to trust.") var programs: [String]

    func run() throws {
        try item.changeList(options: options) { try access($0, trusting: programs).access }
    }
}

struct UntrustApplications: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "untrust",
        abstract: "Take programs off an item's list of trusted applications: they are asked again before using it.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var item: TrustedItemOptions
    @Argument(help: "The programs to take off: executable paths or application identifiers.") var programs: [String]

    func run() throws {
        let paths = Set(programs.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path })
        try item.changeList(options: options) { list in
            var list = list
            list.applications.removeAll { paths.contains($0.executable) || programs.contains($0.applicationIdentifier) }
            return list
        }
    }
}

// MARK: Internet passwords

/// The attributes that name internet passwords, as `security` takes them: `-a` account, `-s` server, `-r` protocol,
/// `-P` port, `-p` path, `-d` security domain, `-t` authentication type, `-G` group.
struct InternetPasswordSelection: ParsableArguments {
    @Option(name: .customShort("a"), help: "Account name.") var account: String?
    @Option(name: .customShort("s"), help: "Server name.") var server: String?
    @Option(name: .customShort("r"), help: "Protocol, four characters (e.g. htps).") var `protocol`: String?
    @Option(name: .customShort("P"), help: "Port.") var port: Int?
    @Option(name: .customShort("p"), help: "Path.") var path: String?
    @Option(name: .customShort("d"), help: "Security domain.") var securityDomain: String?
    @Option(name: .customShort("t"), help: "Authentication type, four characters (e.g. dflt).")
    var authenticationType: String?
    @Option(name: .customShort("G"), help: "Access group.") var accessGroup: String?

    /// A query for the internet passwords these attributes name (an attribute not given matches any value).
    var query: [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassInternetPassword]
        query.set(kSecAttrAccount, account)
        query.set(kSecAttrServer, server)
        query.set(kSecAttrProtocol, `protocol`)
        query.set(kSecAttrPort, port)
        query.set(kSecAttrPath, path)
        query.set(kSecAttrSecurityDomain, securityDomain)
        query.set(kSecAttrAuthenticationType, authenticationType)
        query.set(kSecAttrAccessGroup, accessGroup)
        return query
    }

    /// The new item's attributes: account and server empty when not given, as `security add-internet-password`
    /// makes them.
    var item: [String: Any] {
        var item = query
        item[kSecAttrAccount as String] = account ?? ""
        item[kSecAttrServer as String] = server ?? ""
        return item
    }
}

struct AddInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-internet-password",
        abstract: "Add an internet password (reads it from the terminal or stdin unless -w).")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: InternetPasswordSelection
    @Option(name: .customShort("w"), help: "The password (visible to other users in the process list; prefer stdin).")
    var password: String?
    @Option(name: .customShort("l"), help: "Label.") var label: String?
    @Flag(name: .customShort("U"), help: "Update the item if it exists.") var update = false

    func run() throws {
        try reporting {
            let secret =
                try password.map { SecureBytes(Data($0.utf8)) } ?? readSecret(prompt: "password data for new item: ")
            var attributes: [String: Any] = [kSecValueData as String: secret.unprotectedData()]
            attributes.set(kSecAttrLabel, label)
            try addOrUpdate(selection.item, attributes: attributes, update: update, options: options)
        }
    }
}

struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-internet-password", abstract: "Find an internet password and print its attributes.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: InternetPasswordSelection
    @Flag(name: .customShort("g"), help: "Also print the password.") var showPassword = false
    @Flag(name: .customShort("w"), help: "Print only the password.") var passwordOnly = false

    func run() throws {
        try find(selection.query, options: options, showPassword: showPassword, passwordOnly: passwordOnly)
    }
}

struct DeleteInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-internet-password", abstract: "Delete the internet passwords that match.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: InternetPasswordSelection

    func run() throws {
        try delete(selection.query, options: options)
    }
}

// MARK: Whole keychain

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump", abstract: "Print every item's attributes (and data with -d), as security dump-keychain.")

    @OptionGroup var options: KeychainOptions
    @Flag(name: .customShort("d"), help: "Also print each item's data.") var showData = false

    func run() throws {
        try reporting {
            try options.run(reaching: .everyGroup) {
                for itemClass in [
                    kSecClassGenericPassword, kSecClassInternetPassword, kSecClassCertificate, kSecClassKey,
                ] {
                    var query: [String: Any] = [
                        kSecClass as String: itemClass, kSecMatchLimit as String: kSecMatchLimitAll,
                        kSecReturnAttributes as String: true,
                        kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
                    ]
                    if showData {
                        query[kSecReturnData as String] = true
                        // Items behind an access-control list need an authentication; leave them out.
                        query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUISkip
                    }
                    var result: CFTypeRef?
                    let status = SecItemCopyMatching(query as CFDictionary, &result)
                    if status == errSecItemNotFound { continue }
                    try check(status, "read the keychain")
                    for item in result as? [[String: Any]] ?? [] { printItem(item, showData: showData) }
                }
            }
        }
    }
}

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
        abstract: "Export every item except ThisDeviceOnly ones to a file encrypted under a backup password.")

    @OptionGroup var options: KeychainOptions
    @Argument(help: "The backup file to write.") var file: String

    func run() throws {
        let password = try readSecret(prompt: "backup password: ")
        guard !password.isEmpty else { throw ValidationError("the backup password is empty") }
        try reporting {
            let count = try options.run(reaching: .everyGroup) {
                do {
                    return try Keychain.default.exportBackup(to: URL(fileURLWithPath: file), secret: password)
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(error, operation: "export the keychain")
                }
            }
            print("exported \(count) items to \(file)")
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
                let (count, aside) = try options.run(reaching: .everyGroup) {
                    do {
                        return try Keychain.default.restoreBackup(from: URL(fileURLWithPath: file), secret: password)
                    } catch let error as KeychainError {
                        throw KeychainCommandFailure(error, operation: "restore from the backup")
                    }
                }
                print("the damaged database was moved to \(aside)")
                print("restored \(count) items from \(file)")
                return
            }
            let count = try options.run(reaching: .everyGroup) {
                do {
                    return try Keychain.default.importBackup(from: URL(fileURLWithPath: file), secret: password)
                } catch let error as KeychainError {
                    throw KeychainCommandFailure(error, operation: "import the backup")
                }
            }
            print("imported \(count) items from \(file)")
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
