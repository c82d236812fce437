module space/spawner

go 1.22
