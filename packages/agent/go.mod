module space/agent

go 1.22
