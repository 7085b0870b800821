// keychain-stress: a helper the keychain tests start as a separate process, to test what one process cannot:
// two writers on one store, and a writer killed with SIGKILL.
//
//   keychain-stress add <store-dir | socket:PATH> <prefix> <count>
//       adds generic passwords <prefix>-0 … <prefix>-(count-1), printing "added <i>" after each add that returned
//       success (stdout is flushed per line), and reads every tenth item back, exiting 1 on any failure. The store
//       is opened embedded, or (socket:PATH) reached through the localauthd listening there.
import Foundation
import SecurityClient
import SecurityServer

let arguments = CommandLine.arguments
guard arguments.count == 5, arguments[1] == "add", let count = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: keychain-stress add <store-dir | socket:PATH> <prefix> <count>\n".utf8))
    exit(2)
}
let prefix = arguments[3]
do {
    let client: any SecurityClient =
        if arguments[2].hasPrefix("socket:") {
            try SocketClient(path: String(arguments[2].dropFirst("socket:".count)), accessGroups: ["stress"])
        } else {
            try EmbeddedClient(
                configuration: EmbeddedConfiguration(
                    dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), accessGroups: ["stress"]))
        }
    for index in 0..<count {
        let account = "\(prefix)-\(index)"
        _ = try client.sendBlocking(
            .add([
                "class": .string("genp"), "svce": .string("stress"), "acct": .string(account),
                "v_Data": .data(Data(account.utf8)),
            ]))
        // One write(2) per line, so a line on the pipe means the add before it returned.
        FileHandle.standardOutput.write(Data("added \(index)\n".utf8))
        if index % 10 == 0 {
            let response = try client.sendBlocking(
                .copyMatching([
                    "class": .string("genp"), "svce": .string("stress"), "acct": .string(account),
                    "r_Data": .bool(true),
                ]))
            guard case .items(let results) = response, results.items.first?.data?.unprotectedData() == Data(account.utf8)
            else {
                FileHandle.standardError.write(Data("read back a wrong value for \(account)\n".utf8))
                exit(1)
            }
        }
    }
} catch {
    FileHandle.standardError.write(Data("keychain-stress: \(error)\n".utf8))
    exit(1)
}
