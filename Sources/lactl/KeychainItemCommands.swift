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

/// Prints one item's attributes as `security find-…-password` does, and its data when asked.
func printItem(_ item: [String: Any], showData: Bool) {
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

/// The options that name passwords of one class, as `security` takes them.
protocol PasswordSelection: ParsableArguments {
    /// A query for the passwords the options name (an attribute not given matches any value).
    var query: [String: Any] { get }
    /// The attributes that a new item of the class gets empty when not given (`account` and the service or server),
    /// as `security add-*-password` makes them.
    static var namingAttributes: [CFString] { get }
}

extension PasswordSelection {
    /// The new item's attributes: the query, with the naming attributes not given empty.
    var item: [String: Any] {
        var item = query
        for key in Self.namingAttributes where item[key as String] == nil { item[key as String] = "" }
        return item
    }
}

/// The attributes that name generic passwords, as `security` takes them: `-a` account, `-s` service, `-G` group.
struct GenericPasswordSelection: PasswordSelection {
    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account")) var account: String?
    @Option(name: .customShort("s"), help: ArgumentHelp("Service name.", valueName: "service")) var service: String?
    @Option(name: .customShort("G"), help: ArgumentHelp("Access group.", valueName: "access-group")) var accessGroup:
        String?

    /// A query for the generic passwords these attributes name (an attribute not given matches any value).
    var query: [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        query.set(kSecAttrAccount, account)
        query.set(kSecAttrService, service)
        query.set(kSecAttrAccessGroup, accessGroup)
        return query
    }

    static var namingAttributes: [CFString] { [kSecAttrAccount, kSecAttrService] }
}

struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add a generic password (reads it from the terminal or stdin unless -w).")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: GenericPasswordSelection
    @OptionGroup var newPassword: NewPasswordOptions
    @Option(name: .customShort("j"), help: ArgumentHelp("Comment.", valueName: "comment")) var comment: String?
    @Option(
        name: .customShort("T"),
        help: ArgumentHelp(
            "A program that may use the item without being asked (repeatable; \"\" for none: every program is asked).",
            valueName: "program")
    )
    var trustedApplications: [String] = []

    func run() throws {
        try reporting {
            var attributes = try newPassword.attributes()
            attributes.set(kSecAttrComment, comment)
            if !trustedApplications.isEmpty {
                attributes[kSecAttrAccess as String] = try access(
                    ItemAccess(descriptor: newPassword.label ?? selection.service ?? "", applications: []),
                    trusting: trustedApplications.filter { !$0.isEmpty })
            }
            try addOrUpdate(selection.item, attributes: attributes, update: newPassword.update, options: options)
        }
    }
}

struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password", abstract: "Find a generic password and print its attributes.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: GenericPasswordSelection
    @Option(name: .customShort("l"), help: ArgumentHelp("Label.", valueName: "label")) var label: String?
    @OptionGroup var display: PasswordDisplayOptions

    func run() throws {
        var query = selection.query
        query.set(kSecAttrLabel, label)
        try find(query, options: options, display: display)
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

/// The password options of `add-*-password`, as `security` takes them: `-w` the password (else read from the
/// terminal or standard input), `-l` the label, `-U` update an item that exists.
struct NewPasswordOptions: ParsableArguments {
    @Option(
        name: .customShort("w"),
        help: ArgumentHelp(
            "The password (visible to other users in the process list; prefer stdin).", valueName: "password"))
    var password: String?
    @Option(name: .customShort("l"), help: ArgumentHelp("Label.", valueName: "label")) var label: String?
    @Flag(name: .customShort("U"), help: "Update the item if it exists.") var update = false

    /// The new item's data and label, the password read now when `-w` did not give it.
    func attributes() throws -> [String: Any] {
        let secret =
            try password.map { SecureBytes(Data($0.utf8)) } ?? readSecret(prompt: "password data for new item: ")
        var attributes: [String: Any] = [kSecValueData as String: secret.unprotectedData()]
        attributes.set(kSecAttrLabel, label)
        return attributes
    }
}

/// What `find-*-password` prints of the item's password, as `security`: `-g` also, `-w` only it.
struct PasswordDisplayOptions: ParsableArguments {
    @Flag(name: .customShort("g"), help: "Also print the password.") var showPassword = false
    @Flag(name: .customShort("w"), help: "Print only the password.") var passwordOnly = false
}

/// Prints the first item that matches `query`: its attributes, and its password as `display` asks.
private func find(_ query: [String: Any], options: KeychainOptions, display: PasswordDisplayOptions) throws {
    let (showPassword, passwordOnly) = (display.showPassword, display.passwordOnly)
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

// MARK: Internet passwords

/// The attributes that name internet passwords, as `security` takes them: `-a` account, `-s` server, `-r` protocol,
/// `-P` port, `-p` path, `-d` security domain, `-t` authentication type, `-G` group.
struct InternetPasswordSelection: PasswordSelection {
    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account")) var account: String?
    @Option(name: .customShort("s"), help: ArgumentHelp("Server name.", valueName: "server")) var server: String?
    @Option(
        name: .customShort("r"), help: ArgumentHelp("Protocol, four characters (e.g. htps).", valueName: "protocol"))
    var `protocol`: String?
    @Option(name: .customShort("P"), help: ArgumentHelp("Port.", valueName: "port")) var port: Int?
    @Option(name: .customShort("p"), help: ArgumentHelp("Path.", valueName: "path")) var path: String?
    @Option(name: .customShort("d"), help: ArgumentHelp("Security domain.", valueName: "security-domain"))
    var securityDomain: String?
    @Option(
        name: .customShort("t"),
        help: ArgumentHelp("Authentication type, four characters (e.g. dflt).", valueName: "authentication-type"))
    var authenticationType: String?
    @Option(name: .customShort("G"), help: ArgumentHelp("Access group.", valueName: "access-group")) var accessGroup:
        String?

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

    static var namingAttributes: [CFString] { [kSecAttrAccount, kSecAttrServer] }
}

struct AddInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-internet-password",
        abstract: "Add an internet password (reads it from the terminal or stdin unless -w).")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: InternetPasswordSelection
    @OptionGroup var newPassword: NewPasswordOptions

    func run() throws {
        try reporting {
            try addOrUpdate(
                selection.item, attributes: try newPassword.attributes(), update: newPassword.update, options: options)
        }
    }
}

struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-internet-password", abstract: "Find an internet password and print its attributes.")

    @OptionGroup var options: KeychainOptions
    @OptionGroup var selection: InternetPasswordSelection
    @OptionGroup var display: PasswordDisplayOptions

    func run() throws {
        try find(selection.query, options: options, display: display)
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
