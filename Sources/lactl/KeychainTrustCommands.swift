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

// MARK: Trusted applications

/// Which item `trust` and `untrust` change: a generic password by service and account, or an internet password by
/// server and account.
struct TrustedItemOptions: ParsableArguments {
    @Option(name: .customShort("s"), help: ArgumentHelp("Service name (a generic password).", valueName: "service"))
    var service: String?
    @Option(name: .customShort("r"), help: ArgumentHelp("Server name (an internet password).", valueName: "server"))
    var server: String?
    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account")) var account: String?
    @Option(name: .customShort("G"), help: ArgumentHelp("Access group.", valueName: "access-group")) var accessGroup:
        String?

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
func access(_ list: ItemAccess, trusting paths: [String]) throws -> SecAccess {
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
