import Foundation
import SSHAgentProtocol

// A libFuzzer target over the agent's message parser (`make fuzz`): any bytes must parse or be refused, never
// crash, and a parsed request re-read from the same bytes must be the same request.

func agentMessageFuzz(_ bytes: [UInt8]) {
    if let request = try? AgentRequest.parse(bytes) {
        precondition((try? AgentRequest.parse(bytes)) == request, "parsing is not deterministic")
    }
}
